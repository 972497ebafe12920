import * as grpc from '@grpc/grpc-js';
import { clientOptions, outgoingMetadata } from '@agentroom/kit/grpc';
import { messagingProto, type MessagingServiceClient, type WatchEventsResponse__Output } from '@agentroom/proto';

/** The messaging service as delivery sees it: its global events feed, followed from a position. */
export class MessagingGateway {
  private readonly client: MessagingServiceClient;

  constructor(address: string) {
    const MessagingService = messagingProto().MessagingService;
    this.client = new MessagingService(address, grpc.credentials.createInsecure(), clientOptions(MessagingService.service));
  }

  /** Events after `afterId`, oldest first, for as long as the call lives: no deadline. */
  watchEvents(afterId: string): grpc.ClientReadableStream<WatchEventsResponse__Output> {
    return this.client.watchEvents({ afterId }, outgoingMetadata());
  }

  close(): void {
    this.client.close();
  }
}
