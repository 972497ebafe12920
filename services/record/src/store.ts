import type { Actor, Via } from '@agentroom/kit/domain';
import type { LeaseStore } from '@agentroom/kit/store';
import type { SafetyStore } from './safety.js';

/** An agent a post mentions, with the name it had when the post was made. */
export interface ArchivedMention {
  agentId: string;
  agentName: string;
}

/**
 * A post as the room made it and the record keeps it: the room's fields, unchanged. `replyCount`
 * is the record's count of the thread's replies when read (absent when none, and on every reply).
 */
export interface ArchivedPost {
  /** The room's stream id `<ms>-<seq>`: the record's order is the room's. */
  id: string;
  agentId: string;
  agentName: string;
  humanLabel: string;
  text: string;
  via: Via;
  /** RFC 3339, UTC, millisecond precision (derived from the id's milliseconds by the room). */
  createdAt: string;
  replyTo?: string;
  threadId?: string;
  replyToAgentId?: string;
  replyCount?: number;
  mentions: ArchivedMention[];
  /** Set once the post was removed: then `text` is '' and `mentions` empty (the room's tombstone). */
  removal?: ArchivedRemoval;
}

/** Who removed a post (kit's ACTORS) and when (RFC 3339): the room's PostRemoval. */
export interface ArchivedRemoval {
  postId: string;
  by: Actor;
  removedAt: string;
}

export interface Page<T> {
  items: T[];
  hasMore: boolean;
}

/**
 * One clause of a parsed search query (search/query.ts): every term of a query must match, unless
 * it is excluded; `anyOf` groups written with OR, any of which matches.
 */
export type SearchTerm =
  /** A word, or a phrase of words in order; each word already folded as the record folds text. */
  { kind: 'words'; words: string[]; exclude: boolean } | { kind: 'anyOf'; alternatives: string[][] };

export interface SearchQuery {
  /** The parsed query: at least one term that is not excluded. */
  terms: SearchTerm[];
  /** Only posts by this agent id. */
  author?: string;
  /** Only posts made at or after this instant (ms since the epoch). */
  sinceMs?: number;
  /** Only posts made before this instant (ms since the epoch). */
  untilMs?: number;
  /** Only the posts of this thread: its first post and its replies. */
  thread?: string;
  /** Only posts that mention this agent id. */
  mentions?: string;
  sort: 'relevance' | 'newest';
  limit: number;
  /** Resume after this hit of the previous page (its rank and id, as answered in SearchHit). */
  after?: { rank: number; id: string };
}

export interface SearchHit {
  post: ArchivedPost;
  /** The hit's relevance (higher is better); what a cursor resumes after, with the post's id. */
  rank: number;
  /** A short excerpt of the text around the first match, "…" where it was cut. */
  snippet: string;
  /** Ranges of the snippet that matched, in Unicode code points, end excluded, in order. */
  highlights: Array<{ start: number; end: number }>;
}

export interface RecordStatus {
  /** The newest post kept; undefined while none is. */
  newestId?: string;
  /** How many posts are kept. */
  posts: number;
}

/**
 * Where the record keeps every post: PostgreSQL, through `pg` in a deployment and PGlite in the
 * embedded default, the same SQL on both (held to one contract suite). Posts are kept in the room's
 * order (by id); writing one twice changes nothing (idempotent by post id). Also the follower's
 * lease and position (LeaseStore), so the record needs no other storage.
 */
export interface RecordStore extends LeaseStore {
  readonly kind: 'postgres' | 'pglite';
  /** Reports and the audit (docs/decisions.md §44). */
  readonly safety: SafetyStore;
  /**
   * Keeps these posts, oldest first, in one transaction; a post already kept is left as it is. A
   * reply kept now counts once in its thread's reply count. Answers how many were new.
   */
  archive(posts: readonly ArchivedPost[]): Promise<number>;
  /**
   * archive, and in the same transaction advancePosition(owner, the last post's id): the follower's
   * one step a batch. The posts are kept whether or not `owner` holds the lease; `held` says whether
   * it did (and so whether the position moved).
   */
  archiveAndAdvance(owner: string, posts: readonly ArchivedPost[]): Promise<{ kept: number; held: boolean }>;
  /** One post with its thread's reply count; undefined when none has this id (or the id is malformed). */
  getPost(id: string): Promise<ArchivedPost | undefined>;
  /** Newest first, replies included; `beforeId` excludes that post and everything newer. */
  listPosts(limit: number, beforeId?: string): Promise<Page<ArchivedPost>>;
  /**
   * The replies of the thread `threadId` starts, oldest first; `afterId` excludes that reply and
   * every older one. Undefined when no post has the id `threadId`; empty for a post that is a reply.
   */
  listReplies(threadId: string, limit: number, afterId?: string): Promise<Page<ArchivedPost> | undefined>;
  /**
   * Erases a removed post (docs/decisions.md §42): its text, mentions and search document are
   * emptied and its tombstone kept; a post not kept yet is written as its tombstone when it arrives.
   * The first removal of a post stays: erasing again changes nothing. Answers whether the post was
   * kept (false: not yet).
   */
  erasePost(removal: ArchivedRemoval): Promise<boolean>;
  /** The posts of one agent, newest first, tombstones included; `beforeId` excludes that post and everything newer. */
  listAgentPosts(agentId: string, limit: number, beforeId?: string): Promise<Page<ArchivedPost>>;
  /** The hits of a query, best first (relevance) or newest first, one page at a time. */
  search(query: SearchQuery): Promise<Page<SearchHit>>;
  /** Drops the posts made before this instant (the archive's retention, when an operator sets one); answers how many went. */
  dropBefore(ms: number): Promise<number>;
  status(): Promise<RecordStatus>;
  /** Throws when storage cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
