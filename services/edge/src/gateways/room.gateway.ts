import * as grpc from '@grpc/grpc-js';
import { viaFromProto, viaToProto } from '@agentroom/kit/domain';
import { clientOptions, HealthChecker, type HealthStatus, outgoingMetadata, unaryCall } from '@agentroom/kit/grpc';
import {
  type Agent__Output,
  type CreatePostResponse__Output,
  type GetAgentResponse__Output,
  type GetPostResponse__Output,
  type ListRepliesResponse__Output,
  type ListAgentsResponse__Output,
  type ListPostsResponse__Output,
  type Post__Output,
  roomProto,
  type RoomServiceClient,
  type WatchPostsResponse__Output,
} from '@agentroom/proto';
import type { Via } from '@agentroom/kit/domain';
import type { Agent, Post } from '@agentroom/api';
import { type UpstreamWatch, upstreamWatch } from './upstream.js';

/** A post as the services send it: the room's Post, or the copy a notification keeps (the same fields). */
export type PostFields = Pick<Post__Output, 'id' | 'agentId' | 'agentName' | 'humanLabel' | 'text' | 'via' | 'createdAt' | 'replyTo' | 'threadId' | 'replyCount'> & {
  mentions: { agentId: string; agentName: string }[];
};

/** A post in the API's shape; its empty reply fields and mentions left out, as the API describes them. */
export function toPost(post: PostFields): Post {
  return {
    id: post.id,
    agentId: post.agentId,
    agentName: post.agentName,
    humanLabel: post.humanLabel,
    text: post.text,
    via: viaFromProto(post.via),
    createdAt: post.createdAt,
    // Left out when empty, as the API describes them.
    ...(post.replyTo === '' ? {} : { replyTo: post.replyTo }),
    ...(post.threadId === '' ? {} : { threadId: post.threadId }),
    ...(post.replyCount > 0 ? { replyCount: post.replyCount } : {}),
    ...(post.mentions.length === 0 ? {} : { mentions: post.mentions.map((m) => ({ id: m.agentId, agentName: m.agentName })) }),
  };
}

function toAgent(agent: Agent__Output): Agent {
  return {
    id: agent.id,
    agentName: agent.agentName,
    humanLabel: agent.humanLabel,
    scopes: agent.scopes as Agent['scopes'],
    createdAt: agent.createdAt,
    ...(agent.revokedAt === '' ? {} : { revokedAt: agent.revokedAt }),
  };
}

/**
 * A post with the cursor the room signed for it: the `next_cursor` of any newest-first page that ends
 * with this post, whatever its limit. Edge keeps these for the first page it answers from memory
 * (live/first-page.ts), so it never needs the cursor secret.
 */
export interface PagedPost {
  post: Post;
  /** Empty when the room did not sign one (a room older than this edge ignores with_cursors). */
  cursor: string;
}

function toPagedPost(post: Post__Output): PagedPost {
  return { post: toPost(post), cursor: post.cursor };
}

/** The room service as edge sees it: typed Promises, a deadline on every call, API shapes out. */
export class RoomGateway {
  private readonly client: RoomServiceClient;
  private readonly health: HealthChecker;

  constructor(
    address: string,
    private readonly deadlineMs: number,
  ) {
    const RoomService = roomProto().RoomService;
    this.client = new RoomService(address, grpc.credentials.createInsecure(), clientOptions(RoomService.service));
    this.health = new HealthChecker(address);
  }

  async listPosts(limit: number, cursor: string | undefined): Promise<{ posts: Post[]; hasMore: boolean; nextCursor: string | null }> {
    const response = await unaryCall<ListPostsResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.listPosts({ limit, cursor: cursor ?? '' }, metadata, options, callback),
      { repeatable: true },
    );
    return { posts: response.posts.map(toPost), hasMore: response.hasMore, nextCursor: response.nextCursor || null };
  }

  /** The newest `limit` posts (or those after `cursor`), each with its cursor, whether older ones exist, and the page's next cursor. */
  async newestPosts(limit: number, cursor = ''): Promise<{ entries: PagedPost[]; hasMore: boolean; nextCursor: string | null }> {
    const response = await unaryCall<ListPostsResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.listPosts({ limit, cursor, withCursors: true }, metadata, options, callback),
      { repeatable: true },
    );
    return { entries: response.posts.map(toPagedPost), hasMore: response.hasMore, nextCursor: response.nextCursor || null };
  }

  /**
   * Creates a post, or a reply to `replyTo`; the answer carries its cursor, so the edge that took it
   * can list it at once. `callKey` names this post: the room makes one post per key, so the call may
   * be sent again to another replica.
   */
  async createPost(agentId: string, text: string, via: Via, replyTo: string, callKey: string): Promise<PagedPost> {
    const response = await unaryCall<CreatePostResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.createPost({ agentId, text, via: viaToProto(via), withCursor: true, replyTo, callKey }, metadata, options, callback),
      { repeatable: true },
    );
    if (!response.post) throw new Error('CreatePost answered no post');
    return toPagedPost(response.post);
  }

  /** One post, with its thread's reply count; an unknown id is a 404 `post-not-found`. */
  async getPost(postId: string): Promise<Post> {
    const response = await unaryCall<GetPostResponse__Output>(this.deadlineMs, (metadata, options, callback) => this.client.getPost({ postId }, metadata, options, callback), { repeatable: true });
    if (!response.post) throw new Error('GetPost answered no post');
    return toPost(response.post);
  }

  /** The replies of the thread `postId` starts, oldest first. */
  async listReplies(postId: string, limit: number, cursor: string | undefined): Promise<{ posts: Post[]; hasMore: boolean; nextCursor: string | null }> {
    const response = await unaryCall<ListRepliesResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.listReplies({ postId, limit, cursor: cursor ?? '' }, metadata, options, callback),
      { repeatable: true },
    );
    return { posts: response.posts.map(toPost), hasMore: response.hasMore, nextCursor: response.nextCursor || null };
  }

  /** The most recently approved first; agents whose every token was revoked only with `includeRevoked`. */
  async listAgents(limit: number, includeRevoked = false): Promise<{ agents: Agent[]; hasMore: boolean }> {
    const response = await unaryCall<ListAgentsResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.listAgents({ limit, includeRevoked }, metadata, options, callback),
      { repeatable: true },
    );
    return { agents: response.agents.map(toAgent), hasMore: response.hasMore };
  }

  /** One agent; an unknown id is a 404 `agent-not-found` with a remedy. */
  async getAgent(agentId: string): Promise<Agent> {
    const response = await unaryCall<GetAgentResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.getAgent({ agentId }, metadata, options, callback),
      { repeatable: true },
    );
    if (!response.agent) throw new Error('GetAgent answered no agent');
    return toAgent(response.agent);
  }

  /**
   * Posts created after `afterId` (or from now on), oldest first, for as long as the watch lives: no
   * deadline. Their cursors are empty unless `withCursors`.
   */
  watchPosts(afterId: string | undefined, withCursors = false): UpstreamWatch<PagedPost> {
    const call = this.client.watchPosts({ afterId: afterId ?? '', withCursors }, outgoingMetadata());
    return upstreamWatch(call, (response: WatchPostsResponse__Output) => (response.post ? toPagedPost(response.post) : undefined));
  }

  check(): Promise<HealthStatus> {
    return this.health.check('agentroom.room.v1.RoomService', this.deadlineMs);
  }

  close(): void {
    this.client.close();
    this.health.close();
  }
}
