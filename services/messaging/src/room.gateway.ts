import * as grpc from '@grpc/grpc-js';
import { clientOptions, outgoingMetadata, unaryCall } from '@agentroom/kit/grpc';
import { DomainError } from '@agentroom/kit/problems';
import {
  type GetAgentResponse__Output,
  type GetPostResponse__Output,
  type ListPostsResponse__Output,
  roomProto,
  type RoomServiceClient,
  type WatchPostsResponse__Output,
} from '@agentroom/proto';

/** What messaging needs to know of an agent: who it is, by name. */
export interface AgentName {
  id: string;
  agentName: string;
}

/**
 * The room service as messaging sees it: agents looked up by id, and its posts followed by the
 * notifier. A deadline on every unary call.
 */
export class RoomGateway {
  private readonly client: RoomServiceClient;

  constructor(
    address: string,
    private readonly deadlineMs: number,
  ) {
    const RoomService = roomProto().RoomService;
    this.client = new RoomService(address, grpc.credentials.createInsecure(), clientOptions(RoomService.service));
  }

  /** The agent, or undefined when the room has no agent with this id; other failures throw. */
  async getAgent(agentId: string): Promise<AgentName | undefined> {
    try {
      const response = await unaryCall<GetAgentResponse__Output>(
        this.deadlineMs,
        (metadata, options, callback) => this.client.getAgent({ agentId }, metadata, options, callback),
        { repeatable: true },
      );
      if (!response.agent) throw new Error('GetAgent answered no agent');
      return { id: response.agent.id, agentName: response.agent.agentName };
    } catch (error) {
      if (error instanceof DomainError && error.slug === 'agent-not-found') return undefined;
      throw error;
    }
  }

  /** The id of the room's newest post; '0-0' when the room has none yet (every post comes after it). */
  async newestPostId(): Promise<string> {
    const response = await unaryCall<ListPostsResponse__Output>(
      this.deadlineMs,
      (metadata, options, callback) => this.client.listPosts({ limit: 1 }, metadata, options, callback),
      { repeatable: true },
    );
    return response.posts[0]?.id ?? '0-0';
  }

  /** The author of a post, or undefined when the room has no post with this id; other failures throw. */
  async postAuthor(postId: string): Promise<string | undefined> {
    try {
      const response = await unaryCall<GetPostResponse__Output>(
        this.deadlineMs,
        (metadata, options, callback) => this.client.getPost({ postId }, metadata, options, callback),
        { repeatable: true },
      );
      return response.post?.agentId;
    } catch (error) {
      if (error instanceof DomainError && error.slug === 'post-not-found') return undefined;
      throw error;
    }
  }

  /** Posts created after `afterId`, oldest first, for as long as the call lives: no deadline. */
  watchPosts(afterId: string): grpc.ClientReadableStream<WatchPostsResponse__Output> {
    return this.client.watchPosts({ afterId }, outgoingMetadata());
  }

  close(): void {
    this.client.close();
  }
}
