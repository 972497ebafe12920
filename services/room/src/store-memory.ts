import { compareStreamIds, type Clock, MENTIONS_MAX, StreamIds, systemClock } from '@agentroom/kit';
import type { AgentRecord } from './agents.js';
import { createdAtOf, type MentionRecord, mentionCandidates, nameKey, type PostRecord } from './posts.js';
import type { Appended, NewPost, Page, RoomStore } from './store.js';

/** The first index of `items` (sorted by id) whose id compares to `id` as `accept` wants: a binary search. */
function indexWhere(items: readonly PostRecord[], id: string, accept: (cmp: number) => boolean): number {
  let low = 0;
  let high = items.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (accept(compareStreamIds((items[mid] as PostRecord).id, id))) high = mid;
    else low = mid + 1;
  }
  return low;
}

/**
 * The embedded default: the room in this process's memory, lost on restart (health says degraded).
 * Ids are made exactly like Redis stream ids, so cursors and resumption behave the same.
 */
export class MemoryRoomStore implements RoomStore {
  readonly kind = 'memory';
  private readonly posts: PostRecord[] = [];
  private readonly postsById = new Map<string, PostRecord>();
  /** The replies of each thread, oldest first, by the id of the thread's first post. */
  private readonly threads = new Map<string, PostRecord[]>();
  private readonly agents = new Map<string, AgentRecord>();
  /** The name index: the active agents of each name key (posts.ts nameKey). */
  private readonly agentsByName = new Map<string, Set<string>>();
  /** The name key each active agent is indexed under. */
  private readonly indexedName = new Map<string, string>();
  private readonly listeners = new Set<(post: PostRecord) => void>();
  /** Ids made as Redis makes stream ids, so the feed's positions read the same in both stores. */
  private readonly ids = new StreamIds(() => this.clock.now());

  constructor(private readonly clock: Clock = systemClock) {}

  appendPost(post: NewPost): Promise<Appended> {
    const agent = this.agents.get(post.agentId);
    if (!agent) return Promise.resolve({ missing: 'agent' });
    let thread: { threadId: string; replies: PostRecord[]; answeredBy: string } | undefined;
    if (post.replyTo !== undefined && post.replyTo !== '') {
      const answered = this.postsById.get(post.replyTo);
      if (!answered) return Promise.resolve({ missing: 'reply-to' });
      const threadId = answered.threadId ?? answered.id;
      let replies = this.threads.get(threadId);
      if (!replies) this.threads.set(threadId, (replies = []));
      thread = { threadId, replies, answeredBy: answered.agentId };
    }
    const id = this.ids.next();
    const record: PostRecord = {
      id,
      agentId: post.agentId,
      agentName: agent.agentName,
      humanLabel: agent.humanLabel,
      text: post.text,
      via: post.via,
      createdAt: createdAtOf(id),
      ...(thread ? { replyTo: post.replyTo, threadId: thread.threadId, replyToAgentId: thread.answeredBy } : {}),
      mentions: this.mentionsOf(post.text),
    };
    this.posts.push(record);
    this.postsById.set(id, record);
    thread?.replies.push(record);
    for (const listener of this.listeners) listener(record);
    return Promise.resolve({ post: record });
  }

  /** Whom a text mentions, against the agents kept now (posts.ts mentionCandidates). */
  private mentionsOf(text: string): MentionRecord[] {
    const mentions: MentionRecord[] = [];
    for (const candidate of mentionCandidates(text)) {
      if (mentions.length >= MENTIONS_MAX) break;
      let agent = candidate.id === '' ? undefined : this.agents.get(candidate.id);
      if (agent?.revokedAt !== undefined) agent = undefined;
      if (!agent) {
        const named = this.agentsByName.get(candidate.name);
        if (named?.size === 1) agent = this.agents.get([...named][0] as string);
      }
      if (agent && !mentions.some((mention) => mention.agentId === agent.id)) mentions.push({ agentId: agent.id, agentName: agent.agentName });
    }
    return mentions;
  }

  /** A post as it reads now: with the reply count of the thread it starts, if any. */
  private withReplyCount(post: PostRecord): PostRecord {
    const count = this.threads.get(post.id)?.length ?? 0;
    return count === 0 ? post : { ...post, replyCount: count };
  }

  listPosts(limit: number, beforeId?: string): Promise<Page<PostRecord>> {
    let end = this.posts.length;
    if (beforeId !== undefined) end = indexWhere(this.posts, beforeId, (cmp) => cmp >= 0);
    const start = Math.max(0, end - limit);
    return Promise.resolve({ items: this.posts.slice(start, end).reverse().map((post) => this.withReplyCount(post)), hasMore: start > 0 });
  }

  getPost(id: string): Promise<PostRecord | undefined> {
    const post = this.postsById.get(id);
    return Promise.resolve(post && this.withReplyCount(post));
  }

  listReplies(postId: string, limit: number, afterId?: string): Promise<Page<PostRecord> | undefined> {
    if (!this.postsById.has(postId)) return Promise.resolve(undefined);
    const replies = this.threads.get(postId) ?? [];
    const start = afterId === undefined ? 0 : indexWhere(replies, afterId, (cmp) => cmp > 0);
    return Promise.resolve({ items: replies.slice(start, start + limit), hasMore: start + limit < replies.length });
  }

  readAfter(afterId: string, count: number): Promise<PostRecord[]> {
    const start = indexWhere(this.posts, afterId, (cmp) => cmp > 0);
    return Promise.resolve(this.posts.slice(start, start + count));
  }

  subscribe(listener: (post: PostRecord) => void): Promise<() => void> {
    this.listeners.add(listener);
    return Promise.resolve(() => {
      this.listeners.delete(listener);
    });
  }

  upsertAgent(agent: AgentRecord): Promise<AgentRecord> {
    const existing = this.agents.get(agent.id);
    const record = { ...agent, createdAt: existing?.createdAt ?? agent.createdAt };
    this.agents.set(agent.id, record);
    this.indexName(record);
    return Promise.resolve(record);
  }

  /** Keeps the name index right for this agent: under its name while active, nowhere once revoked. */
  private indexName(agent: AgentRecord): void {
    const before = this.indexedName.get(agent.id);
    if (before !== undefined) {
      const named = this.agentsByName.get(before);
      named?.delete(agent.id);
      if (named?.size === 0) this.agentsByName.delete(before);
      this.indexedName.delete(agent.id);
    }
    if (agent.revokedAt !== undefined) return;
    const key = nameKey(agent.agentName);
    let named = this.agentsByName.get(key);
    if (!named) this.agentsByName.set(key, (named = new Set()));
    named.add(agent.id);
    this.indexedName.set(agent.id, key);
  }

  getAgent(id: string): Promise<AgentRecord | undefined> {
    return Promise.resolve(this.agents.get(id));
  }

  listAgents(limit: number, includeRevoked = false): Promise<Page<AgentRecord>> {
    // Map order is insertion order: reversed, it is newest first (upserts keep their place).
    const all = [...this.agents.values()].reverse().filter((agent) => includeRevoked || agent.revokedAt === undefined);
    return Promise.resolve({ items: all.slice(0, limit), hasMore: all.length > limit });
  }

  ping(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.listeners.clear();
    return Promise.resolve();
  }
}
