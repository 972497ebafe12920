import * as grpc from '@grpc/grpc-js';
import { CLIENT_OPTIONS, DomainError, unaryCall } from '@agentroom/kit';
import { type GetAgentResponse__Output, roomProto, type RoomServiceClient } from '@agentroom/proto';

/** What messaging needs to know of an agent: who it is, by name. */
export interface AgentName {
  id: string;
  agentName: string;
}

/** The room service as messaging sees it: agents looked up by id. A deadline on every call. */
export class RoomGateway {
  private readonly client: RoomServiceClient;

  constructor(
    address: string,
    private readonly deadlineMs: number,
  ) {
    const RoomService = roomProto().RoomService;
    this.client = new RoomService(address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  }

  /** The agent, or undefined when the room has no agent with this id; other failures throw. */
  async getAgent(agentId: string): Promise<AgentName | undefined> {
    try {
      const response = await unaryCall<GetAgentResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
        this.client.getAgent({ agentId }, metadata, options, callback),
      );
      if (!response.agent) throw new Error('GetAgent answered no agent');
      return { id: response.agent.id, agentName: response.agent.agentName };
    } catch (error) {
      if (error instanceof DomainError && error.slug === 'agent-not-found') return undefined;
      throw error;
    }
  }

  close(): void {
    this.client.close();
  }
}
