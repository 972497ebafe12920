import * as grpc from '@grpc/grpc-js';
import { CLIENT_OPTIONS, type Scope, unaryCall } from '@agentroom/kit';
import { roomProto, type RoomServiceClient, type UpsertAgentResponse__Output } from '@agentroom/proto';

/** The room service as auth sees it: approval writes the agent record there. */
export class RoomGateway {
  private readonly client: RoomServiceClient;

  constructor(
    address: string,
    private readonly deadlineMs: number,
  ) {
    const RoomService = roomProto().RoomService;
    this.client = new RoomService(address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  }

  /** Creates the agent (empty id) or updates it; answers its id. */
  async upsertAgent(agent: { id: string; agentName: string; humanLabel: string; scopes: Scope[] }): Promise<string> {
    const response = await unaryCall<UpsertAgentResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.upsertAgent({ agent: { ...agent, createdAt: '' } }, metadata, options, callback),
    );
    return response.agent?.id ?? '';
  }

  close(): void {
    this.client.close();
  }
}
