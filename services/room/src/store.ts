import type { FeedSource } from '@agentroom/kit';
import type { AgentRecord } from './agents.js';
import type { PostRecord, Via } from './posts.js';

/** A post as its author asks for it: the store adds the author's name and label from their record. */
export interface NewPost {
  agentId: string;
  text: string;
  via: Via;
}

export interface Page<T> {
  items: T[];
  hasMore: boolean;
}

/**
 * Where the room keeps its posts and agents. Two implementations, Redis and memory, held to one
 * contract test suite. Posts are a log: ids are stream ids, newest last.
 */
export interface RoomStore extends FeedSource<PostRecord> {
  readonly kind: 'redis' | 'memory';
  /**
   * Appends a post by the agent `post.agentId`, with the name and label its record holds at that
   * moment (read and append are one step); undefined, with nothing appended, when no such agent is kept.
   */
  appendPost(post: NewPost): Promise<PostRecord | undefined>;
  /** Newest first; `beforeId` excludes that post and everything newer. */
  listPosts(limit: number, beforeId?: string): Promise<Page<PostRecord>>;
  /** Creates or replaces an agent; the first `createdAt` is kept. */
  upsertAgent(agent: AgentRecord): Promise<AgentRecord>;
  getAgent(id: string): Promise<AgentRecord | undefined>;
  /** The most recently created first; agents with `revokedAt` only when `includeRevoked`. */
  listAgents(limit: number, includeRevoked?: boolean): Promise<Page<AgentRecord>>;
  /** Throws when storage cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
