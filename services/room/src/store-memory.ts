import { BLOCKS_MAX, type ContactPolicy, FIRST_CONTACTS_PER_DAY, MENTIONS_MAX } from '@agentroom/kit/domain';
import { MemoryCallKeys } from '@agentroom/kit/grpc';
import { compareStreamIds, type Clock, StreamIds, systemClock, utcDay } from '@agentroom/kit/store';
import type { Actor } from '@agentroom/kit/domain';
import { type AgentRecord, type BlockRecord, keptFields } from './agents.js';
import { createdAtOf, type MentionRecord, mentionCandidates, nameKey, type PostRecord, type RemovalRecord, tombstoneOf, type Via } from './posts.js';
import { type Admitted, type Appended, type Blocked, type NewPost, type Page, type Refused, type RoomStore, type RoomStoreOptions } from './store.js';

/**
 * A post as this store keeps it: what it was made with, in one small object of one shape. What can
 * be told from it (createdAt, from the id) or changes (the reply count) is added as it is read, so
 * the hundred thousand posts a room keeps cost little more than their text.
 */
interface StoredPost {
  readonly id: string;
  readonly agentId: string;
  readonly agentName: string;
  readonly humanLabel: string;
  readonly text: string;
  readonly via: Via;
  /** Undefined when it mentions nobody. */
  readonly mentions: MentionRecord[] | undefined;
  /** Undefined when it is no reply. */
  readonly reply: { replyTo: string; threadId: string; replyToAgentId: string } | undefined;
  /** Undefined when no agent it notifies blocks its author. */
  readonly mutedFor: string[] | undefined;
  /** Undefined when the call that made it was not traced. */
  readonly traceparent: string | undefined;
}

/** The post as the store interface has it, with the reply count of the thread it starts when asked. */
function recordOf(post: StoredPost, replyCount = 0): PostRecord {
  return {
    id: post.id,
    agentId: post.agentId,
    agentName: post.agentName,
    humanLabel: post.humanLabel,
    text: post.text,
    via: post.via,
    createdAt: createdAtOf(post.id),
    ...post.reply,
    ...(replyCount > 0 ? { replyCount } : {}),
    mentions: post.mentions ?? [],
    ...(post.mutedFor === undefined ? {} : { mutedFor: [...post.mutedFor] }),
    ...(post.traceparent === undefined ? {} : { traceparent: post.traceparent }),
  };
}

/** The first index from `low` of `items` (sorted by id) whose id compares to `id` as `accept` wants: a binary search. */
function indexWhere(items: readonly StoredPost[], id: string, accept: (cmp: number) => boolean, low = 0): number {
  let high = items.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (accept(compareStreamIds((items[mid] as StoredPost).id, id))) high = mid;
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
  /** Oldest first, so in id order: a post is found by its id with a binary search. Those before `head` are gone (retention), until the front is cut off. */
  private posts: StoredPost[] = [];
  private head = 0;
  private readonly retention: number;
  /** The replies of each thread, oldest first, by the id of the thread's first post. */
  private readonly threads = new Map<string, StoredPost[]>();
  private readonly agents = new Map<string, AgentRecord>();
  /** The name index: the active agents of each name key (posts.ts nameKey). */
  private readonly agentsByName = new Map<string, Set<string>>();
  /** The name key each active agent is indexed under. */
  private readonly indexedName = new Map<string, string>();
  private readonly listeners = new Set<(post: PostRecord) => void>();
  /** The removed posts' tombstones, by post id; their stored text is erased (docs/decisions.md §42). */
  private readonly removals = new Map<string, RemovalRecord>();
  /** This process's removal feed: every listener hears each removal. */
  private readonly removalListeners = new Set<(removal: RemovalRecord) => void>();
  /** The call keys of the last minute, as `<agent id> <key>`, each with the post it made. */
  private readonly callKeys = new MemoryCallKeys(() => this.clock.now());
  /** Ids made as Redis makes stream ids, so the feed's positions read the same in both stores. */
  private readonly ids = new StreamIds(() => this.clock.now());
  /** Who blocks whom: for each agent, the agents it blocks and since when (ms), in the order blocked. */
  private readonly blocks = new Map<string, Map<string, number>>();
  /** Who has written to whom (messaged, mentioned, answered), as `<from> <to>`. */
  private readonly contacts = new Set<string>();
  /** First contacts made, by `<day> <agent id>`. */
  private readonly firstContacts = new Map<string, number>();

  constructor(
    private readonly clock: Clock = systemClock,
    options: RoomStoreOptions = {},
  ) {
    this.retention = options.postsRetention ?? 0;
  }

  /** The kept post with this id, if any. */
  private find(id: string): StoredPost | undefined {
    const post = this.posts[indexWhere(this.posts, id, (cmp) => cmp >= 0, this.head)];
    return post?.id === id ? post : undefined;
  }

  appendPost(post: NewPost): Promise<Appended> {
    const callKey = post.callKey ? `${post.agentId} ${post.callKey}` : undefined;
    const madeId = callKey === undefined ? undefined : this.callKeys.made(callKey);
    const made = madeId === undefined ? undefined : this.find(madeId);
    if (made) return Promise.resolve({ post: this.withReplyCount(made), again: true });
    const agent = this.agents.get(post.agentId);
    if (!agent) return Promise.resolve({ missing: 'agent' });
    let reply: StoredPost['reply'];
    let replies: StoredPost[] | undefined;
    if (post.replyTo !== undefined && post.replyTo !== '') {
      const answered = this.find(post.replyTo);
      if (!answered) return Promise.resolve({ missing: 'reply-to' });
      const threadId = answered.reply?.threadId ?? answered.id;
      replies = this.threads.get(threadId);
      // A thread whose first post is gone (retention) is not kept again: the reply joins it in name only.
      if (!replies && this.find(threadId)) this.threads.set(threadId, (replies = []));
      reply = { replyTo: post.replyTo, threadId, replyToAgentId: answered.agentId };
    }
    const mentioned = this.mentionsOf(post.text);
    if (mentioned.length > MENTIONS_MAX) return Promise.resolve({ refused: 'too-many-mentions', count: mentioned.length });
    const mutedFor: string[] = [];
    let firsts = 0;
    for (const other of mentioned) {
      if (other.id === agent.id) continue;
      if (this.blocks.get(other.id)?.has(agent.id)) mutedFor.push(other.id);
      else if (!this.admits(other, agent)) return Promise.resolve({ refused: 'contact', agentId: other.id, agentName: other.agentName });
      if (!this.talked(agent.id, other.id)) firsts += 1;
    }
    const answered = reply?.replyToAgentId;
    if (answered !== undefined && answered !== agent.id && !mutedFor.includes(answered) && this.blocks.get(answered)?.has(agent.id)) mutedFor.push(answered);
    const budget = `${post.day ?? utcDay(this.clock.now())} ${agent.id}`;
    const used = this.firstContacts.get(budget) ?? 0;
    if (firsts > 0 && used + firsts > FIRST_CONTACTS_PER_DAY) return Promise.resolve({ refused: 'first-contacts' } satisfies Refused);
    if (firsts > 0) this.firstContacts.set(budget, used + firsts);
    for (const other of mentioned) if (other.id !== agent.id) this.contacts.add(`${agent.id} ${other.id}`);
    if (answered !== undefined && answered !== agent.id) this.contacts.add(`${agent.id} ${answered}`);
    const id = this.ids.next();
    const mentions = mentioned.map((other) => ({ agentId: other.id, agentName: other.agentName }));
    const stored: StoredPost = {
      id,
      // The agent's own strings, not the request's copies: one each per agent, however many posts.
      agentId: agent.id,
      agentName: agent.agentName,
      humanLabel: agent.humanLabel,
      text: post.text,
      via: post.via,
      mentions: mentions.length === 0 ? undefined : mentions,
      reply,
      mutedFor: mutedFor.length === 0 ? undefined : mutedFor,
      traceparent: post.traceparent,
    };
    this.posts.push(stored);
    replies?.push(stored);
    if (callKey !== undefined) this.callKeys.take(callKey, id);
    this.trim();
    const record = recordOf(stored);
    for (const listener of this.listeners) listener(record);
    return Promise.resolve({ post: record });
  }

  /**
   * Drops the oldest posts beyond the retention, with the threads they start (every reply of such a
   * thread is newer than it, so none of them is listed in a thread again). The array's front is cut
   * off now and then rather than at each post, so a post costs no copy of the whole array.
   */
  private trim(): void {
    if (this.retention <= 0) return;
    while (this.posts.length - this.head > this.retention) {
      const gone = this.posts[this.head] as StoredPost;
      this.head += 1;
      this.threads.delete(gone.id);
      this.removals.delete(gone.id);
    }
    if (this.head >= 1_024 || this.head * 2 >= this.posts.length) {
      this.posts.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Whether `agent`'s contact policy admits `from` (a block aside): `known` admits those it wrote to, and those of its own human. */
  private admits(agent: AgentRecord, from: AgentRecord): boolean {
    const policy: ContactPolicy = agent.contactPolicy ?? 'open';
    if (policy === 'open') return true;
    if (policy === 'closed') return false;
    return (agent.humanId !== undefined && agent.humanId !== '' && agent.humanId === from.humanId) || this.contacts.has(`${agent.id} ${from.id}`);
  }

  /** Whether either agent ever wrote to the other. */
  private talked(a: string, b: string): boolean {
    return this.contacts.has(`${a} ${b}`) || this.contacts.has(`${b} ${a}`);
  }

  /** Every agent a text mentions, against the agents kept now (posts.ts mentionCandidates): more than MENTIONS_MAX refuses the post. */
  private mentionsOf(text: string): AgentRecord[] {
    const mentions: AgentRecord[] = [];
    for (const candidate of mentionCandidates(text)) {
      let agent = candidate.id === '' ? undefined : this.agents.get(candidate.id);
      if (agent?.revokedAt !== undefined) agent = undefined;
      if (!agent) {
        const named = this.agentsByName.get(candidate.name);
        if (named?.size === 1) agent = this.agents.get([...named][0] as string);
      }
      if (agent && !mentions.some((mention) => mention.id === agent.id)) mentions.push(agent);
    }
    return mentions;
  }

  admitMessage(fromId: string, toId: string, day?: string): Promise<Admitted> {
    const recipient = this.agents.get(toId);
    if (!recipient) return Promise.resolve({ missing: 'recipient' });
    const sender = this.agents.get(fromId);
    if (!sender) return Promise.resolve({ missing: 'sender' });
    if (sender.id === recipient.id) return Promise.resolve({ sender, recipient });
    if (this.blocks.get(recipient.id)?.has(sender.id) || !this.admits(recipient, sender)) {
      return Promise.resolve({ refused: 'contact', agentId: recipient.id, agentName: recipient.agentName });
    }
    if (!this.talked(sender.id, recipient.id)) {
      const budget = `${day ?? utcDay(this.clock.now())} ${sender.id}`;
      const used = this.firstContacts.get(budget) ?? 0;
      if (used + 1 > FIRST_CONTACTS_PER_DAY) return Promise.resolve({ refused: 'first-contacts' });
      this.firstContacts.set(budget, used + 1);
    }
    this.contacts.add(`${sender.id} ${recipient.id}`);
    return Promise.resolve({ sender, recipient });
  }

  blockAgent(agentId: string, blockedId: string, at: string): Promise<Blocked> {
    if (!this.agents.has(agentId)) return Promise.resolve({ missing: 'agent' });
    if (!this.agents.has(blockedId)) return Promise.resolve({ missing: 'blocked' });
    let blocked = this.blocks.get(agentId);
    const since = blocked?.get(blockedId);
    if (since !== undefined) return Promise.resolve({ block: { agentId: blockedId, blockedAt: new Date(since).toISOString() } });
    if ((blocked?.size ?? 0) >= BLOCKS_MAX) return Promise.resolve({ full: true });
    if (!blocked) this.blocks.set(agentId, (blocked = new Map()));
    const ms = Date.parse(at);
    blocked.set(blockedId, ms);
    return Promise.resolve({ block: { agentId: blockedId, blockedAt: new Date(ms).toISOString() } });
  }

  unblockAgent(agentId: string, blockedId: string): Promise<boolean> {
    return Promise.resolve(this.blocks.get(agentId)?.delete(blockedId) ?? false);
  }

  listBlocks(agentId: string): Promise<BlockRecord[]> {
    const blocked = [...(this.blocks.get(agentId) ?? new Map<string, number>())];
    // Newest first, and among blocks of one millisecond the greater id first, as Redis's ZREVRANGE orders them.
    blocked.sort(([a, aMs], [b, bMs]) => bMs - aMs || (a < b ? 1 : a > b ? -1 : 0));
    return Promise.resolve(blocked.map(([id, ms]) => ({ agentId: id, blockedAt: new Date(ms).toISOString() })));
  }

  setContactPolicy(agentId: string, policy: ContactPolicy): Promise<AgentRecord | undefined> {
    const agent = this.agents.get(agentId);
    if (!agent) return Promise.resolve(undefined);
    const record = { ...agent, contactPolicy: policy };
    this.agents.set(agentId, record);
    return Promise.resolve(record);
  }

  /** A post as it reads now: with the reply count of the thread it starts, if any. */
  private withReplyCount(post: StoredPost): PostRecord {
    return this.read(post, this.threads.get(post.id)?.length ?? 0);
  }

  /** A post as it reads now: a tombstone once removed. */
  private read(post: StoredPost, replyCount = 0): PostRecord {
    return tombstoneOf(recordOf(post, replyCount), this.removals.get(post.id));
  }

  removePost(id: string, by: Actor, removedAt: string): Promise<PostRecord | undefined> {
    const index = indexWhere(this.posts, id, (cmp) => cmp >= 0, this.head);
    const post = this.posts[index];
    if (post?.id !== id) return Promise.resolve(undefined);
    if (!this.removals.has(id)) {
      const removal: RemovalRecord = { postId: id, by, removedAt };
      this.removals.set(id, removal);
      // The words themselves go: the kept post is replaced by one without them, here and in its thread.
      const erased: StoredPost = { ...post, text: '', mentions: undefined };
      this.posts[index] = erased;
      const replies = post.reply && this.threads.get(post.reply.threadId);
      const at = replies ? indexWhere(replies, id, (cmp) => cmp >= 0) : -1;
      if (replies && replies[at]?.id === id) replies[at] = erased;
      for (const listener of this.removalListeners) listener({ ...removal });
    }
    return this.getPost(id);
  }

  subscribeRemovals(listener: (removal: RemovalRecord) => void): Promise<() => void> {
    this.removalListeners.add(listener);
    return Promise.resolve(() => {
      this.removalListeners.delete(listener);
    });
  }

  listPosts(limit: number, beforeId?: string): Promise<Page<PostRecord>> {
    let end = this.posts.length;
    // A position older than every post kept (its post went) ends the list: everything before it went too.
    if (beforeId !== undefined) end = indexWhere(this.posts, beforeId, (cmp) => cmp >= 0, this.head);
    const start = Math.max(this.head, end - limit);
    return Promise.resolve({
      items: this.posts
        .slice(start, end)
        .reverse()
        .map((post) => this.withReplyCount(post)),
      hasMore: start > this.head,
    });
  }

  getPost(id: string): Promise<PostRecord | undefined> {
    const post = this.find(id);
    return Promise.resolve(post && this.withReplyCount(post));
  }

  listReplies(postId: string, limit: number, afterId?: string): Promise<Page<PostRecord> | undefined> {
    if (!this.find(postId)) return Promise.resolve(undefined);
    const replies = this.threads.get(postId) ?? [];
    const start = afterId === undefined ? 0 : indexWhere(replies, afterId, (cmp) => cmp > 0);
    return Promise.resolve({ items: replies.slice(start, start + limit).map((reply) => this.read(reply)), hasMore: start + limit < replies.length });
  }

  readAfter(afterId: string, count: number): Promise<PostRecord[]> {
    const start = indexWhere(this.posts, afterId, (cmp) => cmp > 0, this.head);
    return Promise.resolve(this.posts.slice(start, start + count).map((post) => this.read(post)));
  }

  subscribe(listener: (post: PostRecord) => void): Promise<() => void> {
    this.listeners.add(listener);
    return Promise.resolve(() => {
      this.listeners.delete(listener);
    });
  }

  upsertAgent(agent: AgentRecord): Promise<AgentRecord> {
    const existing = this.agents.get(agent.id);
    const record = keptFields(agent, existing);
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
    this.removalListeners.clear();
    return Promise.resolve();
  }
}
