import type { FeedSource } from '@agentroom/kit/store';
import type { Actor, ContactPolicy } from '@agentroom/kit/domain';
import type { AgentRecord, BlockRecord } from './agents.js';
import type { PostRecord, RemovalRecord, Via } from './posts.js';

/** A post as its author asks for it: the store adds the author's name and label from their record. */
export interface NewPost {
  agentId: string;
  text: string;
  via: Via;
  /** The id of the post it answers; absent (or empty) when it is not a reply. */
  replyTo?: string;
  /**
   * The caller's name for this one post (CreatePost's call_key): a post by the same agent with a key
   * taken within kit's `CALL_KEY_MS` is not appended again; the post made then is answered instead.
   */
  callKey?: string;
  /** The UTC day (kit's utcDay) whose first-contact budget the post counts against; today when absent. */
  day?: string;
  /** The W3C traceparent of the call that makes it, kept with the post when tracing is on (PostRecord.traceparent). */
  traceparent?: string;
}

/**
 * Why a post, or a direct message, is not made (docs/decisions.md §40): it names more than
 * MENTIONS_MAX agents (`count` of them); an agent it mentions, or the recipient, does not accept it
 * from the author (a block, for a direct message, or its contact policy); or it would reach more
 * agents the author never talked with than its first-contact budget has left today.
 */
export type Refused =
  { refused: 'too-many-mentions'; count: number } | { refused: 'contact'; agentId: string; agentName: string } | { refused: 'first-contacts' };

/**
 * What appendPost did: the post it appended (`again` when the call key had made it already, and
 * nothing was appended now), or which of the records the post needs it does not keep.
 */
export type Appended = { post: PostRecord; again?: true } | { missing: 'agent' | 'reply-to' } | Refused;

/** What admitMessage did: both agents, once admitted; or which is missing; or why it is refused. */
export type Admitted =
  { sender: AgentRecord; recipient: AgentRecord } | { missing: 'sender' | 'recipient' } | Exclude<Refused, { refused: 'too-many-mentions' }>;

/** What blockAgent did: the block (made now or before); or which agent is missing; or `full`, at BLOCKS_MAX. */
export type Blocked = { block: BlockRecord } | { missing: 'agent' | 'blocked' } | { full: true };

export interface Page<T> {
  items: T[];
  hasMore: boolean;
}

/** How a store is set up beyond where it keeps its data. */
export interface RoomStoreOptions {
  /**
   * How many of the newest posts it keeps (docs/decisions.md §19): each new post past this number
   * drops the oldest, in the same step. Undefined or 0 keeps every post.
   */
  postsRetention?: number;
}

/**
 * Where the room keeps its posts and agents. Two implementations, Redis and memory, held to one
 * contract test suite. Posts are a log: ids are stream ids, newest last. Threads are flat: a reply
 * to a reply joins the thread of the post it answers, whose first post is the thread's id.
 *
 * With a retention (RoomStoreOptions), the oldest posts go as new ones arrive. A post that went is
 * unknown from then on, as one never made: no getPost, no reply to it, no listReplies of its thread.
 * A thread goes with its first post; its replies still kept stay in the room's list with their
 * reply fields, and a reply to one of them joins no thread that can be listed.
 */
export interface RoomStore extends FeedSource<PostRecord> {
  readonly kind: 'redis' | 'memory';
  /**
   * Appends a post by the agent `post.agentId`, with the name and label its record holds at that
   * moment, and the agents its text mentions resolved against the agents kept at that moment (one
   * step with the append). A reply (`replyTo`) joins the thread of the post it answers, and counts
   * in that thread's reply count, in the same step. Nothing is appended when the author is not kept
   * (`missing: 'agent'`, checked first) or `replyTo` is no post of the room (`missing: 'reply-to'`).
   * A `callKey` the store took from the same agent within kit's `CALL_KEY_MS` appends nothing and
   * answers the post it made (`again`), as it is now; checked before anything else, in the same step.
   * The same step applies trust and safety's rules (docs/decisions.md §40, §41): the mention limit,
   * blocks (`mutedFor`), contact policies and the first-contact budget of `day`; a refused post makes
   * nothing, a made one notes whom its author has written to.
   */
  appendPost(post: NewPost): Promise<Appended>;
  /**
   * Admits a direct message from `fromId` to `toId` by the same rules, in one step: a block of the
   * sender by the recipient refuses it as its policy would; a first contact counts against the
   * sender's budget of `day`; once admitted, the sender has written to the recipient. A note to self
   * is always admitted, and counts nothing.
   */
  admitMessage(fromId: string, toId: string, day?: string): Promise<Admitted>;
  /** `agentId` blocks `blockedId` from `at` (RFC 3339); blocking again changes nothing and answers the first block. */
  blockAgent(agentId: string, blockedId: string, at: string): Promise<Blocked>;
  /** Lifts a block; false when there was none. */
  unblockAgent(agentId: string, blockedId: string): Promise<boolean>;
  /** Every agent `agentId` blocks, the newest block first (ties: the greater id first); at most BLOCKS_MAX. */
  listBlocks(agentId: string): Promise<BlockRecord[]>;
  /** Sets an agent's contact policy; undefined when no agent has the id. */
  setContactPolicy(agentId: string, policy: ContactPolicy): Promise<AgentRecord | undefined>;
  /** Newest first, replies included; `beforeId` excludes that post and everything newer. Reply counts as they are now. */
  listPosts(limit: number, beforeId?: string): Promise<Page<PostRecord>>;
  /** One post with its reply count as it is now; undefined when no post has this id. */
  getPost(id: string): Promise<PostRecord | undefined>;
  /**
   * The replies of the thread `postId` starts, oldest first; `afterId` excludes that reply and every
   * older one. Undefined when no post has the id `postId`; an empty page for a post that is a reply.
   */
  listReplies(postId: string, limit: number, afterId?: string): Promise<Page<PostRecord> | undefined>;
  /**
   * Removes a post (docs/decisions.md §42): from then on every read answers it as a tombstone (text
   * '', no mentions, `removal` set) in the same place, thread and counts, and the removal is told to
   * every `subscribeRemovals` listener of every process on this storage. Removing a removed post
   * changes nothing and answers the tombstone it has. Undefined when no post has this id.
   */
  removePost(id: string, by: Actor, removedAt: string): Promise<PostRecord | undefined>;
  /**
   * Calls `listener` for each post removed from now on, by any process on this storage; resolves,
   * with the unsubscribe, once every later removal reaches it. Live only: nothing is replayed.
   */
  subscribeRemovals(listener: (removal: RemovalRecord) => void): Promise<() => void>;
  /**
   * Creates or replaces an agent; the first `createdAt` is kept, and so are the stored `humanId` and
   * `contactPolicy` when the new record has none (auth knows neither). The name index (which active agent
   * an `@name` mentions) follows in the same step: a rename moves it, a revocation drops it.
   */
  upsertAgent(agent: AgentRecord): Promise<AgentRecord>;
  getAgent(id: string): Promise<AgentRecord | undefined>;
  /** The most recently created first; agents with `revokedAt` only when `includeRevoked`. */
  listAgents(limit: number, includeRevoked?: boolean): Promise<Page<AgentRecord>>;
  /** Throws when storage cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
