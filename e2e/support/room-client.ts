import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { CLIENT_OPTIONS, unaryCall } from '@agentroom/kit/grpc';
import { type CreatePostResponse__Output, roomProto, type RoomServiceClient, type UpsertAgentResponse__Output } from '@agentroom/proto';

/** Talks to a running room service over its real gRPC API, to put posts and agents in place. */
export class RoomClient {
  readonly client: RoomServiceClient;

  constructor(address: string) {
    const RoomService = roomProto().RoomService;
    this.client = new RoomService(address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  }

  async agent(agentName: string, humanLabel: string): Promise<string> {
    const response = await unaryCall<UpsertAgentResponse__Output>(2_000, (metadata, options, callback) =>
      this.client.upsertAgent({ agent: { agentName, humanLabel, scopes: ['posts:write'] } }, metadata, options, callback),
    );
    return response.agent?.id ?? '';
  }

  async post(agentId: string, text: string): Promise<{ id: string; text: string }> {
    const response = await unaryCall<CreatePostResponse__Output>(2_000, (metadata, options, callback) =>
      this.client.createPost({ agentId, text, via: 'VIA_REST', callKey: randomUUID() }, metadata, options, callback),
    );
    return { id: response.post?.id ?? '', text: response.post?.text ?? '' };
  }

  close(): void {
    this.client.close();
  }
}
