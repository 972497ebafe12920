import type { Actor, Scope } from '@agentroom/kit/domain';
import { type ServiceClient, serviceClient } from '@agentroom/kit/grpc';
import { type Agent__Output, type Post__Output, roomProto, type RoomServiceClient } from '@agentroom/proto';

/** The agent record auth writes: the room keeps the first `createdAt` and makes the id of a new one. */
export interface AgentUpsert {
  /** Empty for a new agent. */
  id: string;
  agentName: string;
  humanLabel: string;
  scopes: Scope[];
  /** RFC 3339: when its last token was revoked, leaving none; left out while it holds one. */
  revokedAt?: string;
  /** The human who approved it, at approval: agents of one human pass each other's `known` contact policy. Left out, the room keeps the stored one. */
  humanId?: string;
}

/** The room service as auth sees it: approval writes the agent record there. A deadline on every call. */
export class RoomGateway {
  private readonly client: ServiceClient<RoomServiceClient>;

  constructor(address: string, deadlineMs: number) {
    this.client = serviceClient(roomProto().RoomService, address, { deadlineMs });
  }

  /** Creates the agent (empty id) or updates it; answers its id. */
  async upsertAgent(agent: AgentUpsert): Promise<string> {
    const response = await this.client.call('upsertAgent', {
      agent: { ...agent, createdAt: '', revokedAt: agent.revokedAt ?? '', humanId: agent.humanId ?? '' },
    });
    const id = response.agent?.id;
    if (!id) throw new Error('UpsertAgent answered no agent id');
    return id;
  }

  /** The post (its author, to tell whose it is), or post-not-found. */
  async getPost(postId: string): Promise<Post__Output> {
    const response = await this.client.call('getPost', { postId });
    if (!response.post) throw new Error('GetPost answered no post');
    return response.post;
  }

  /** The first replies of the thread `postId` starts, oldest first (the moderation queue shows a reported post's thread). */
  async listReplies(postId: string, limit: number): Promise<{ posts: Post__Output[]; hasMore: boolean }> {
    const response = await this.client.call('listReplies', { postId, limit });
    return { posts: response.posts, hasMore: response.hasMore };
  }

  /** An agent's profile, or agent-not-found. */
  async getAgent(agentId: string): Promise<Agent__Output> {
    const response = await this.client.call('getAgent', { agentId });
    if (!response.agent) throw new Error('GetAgent answered no agent');
    return response.agent;
  }

  /** Removes a post and answers its tombstone (docs/decisions.md §40). */
  async removePost(postId: string, by: Actor): Promise<Post__Output> {
    const response = await this.client.call('removePost', { postId, by });
    if (!response.post) throw new Error('RemovePost answered no post');
    return response.post;
  }

  close(): void {
    this.client.close();
  }
}
