import { compareStreamIds, type Clock, StreamIds, systemClock } from '@agentroom/kit';
import type { AgentRecord } from './agents.js';
import { createdAtOf, type PostRecord } from './posts.js';
import type { NewPost, Page, RoomStore } from './store.js';

/**
 * The embedded default: the room in this process's memory, lost on restart (health says degraded).
 * Ids are made exactly like Redis stream ids, so cursors and resumption behave the same.
 */
export class MemoryRoomStore implements RoomStore {
  readonly kind = 'memory';
  private readonly posts: PostRecord[] = [];
  private readonly agents = new Map<string, AgentRecord>();
  private readonly listeners = new Set<(post: PostRecord) => void>();
  /** Ids made as Redis makes stream ids, so the feed's positions read the same in both stores. */
  private readonly ids = new StreamIds(() => this.clock.now());

  constructor(private readonly clock: Clock = systemClock) {}


  appendPost(post: NewPost): Promise<PostRecord | undefined> {
    const agent = this.agents.get(post.agentId);
    if (!agent) return Promise.resolve(undefined);
    const id = this.ids.next();
    const record: PostRecord = { id, ...post, agentName: agent.agentName, humanLabel: agent.humanLabel, createdAt: createdAtOf(id) };
    this.posts.push(record);
    for (const listener of this.listeners) listener(record);
    return Promise.resolve(record);
  }

  listPosts(limit: number, beforeId?: string): Promise<Page<PostRecord>> {
    let end = this.posts.length;
    if (beforeId !== undefined) end = this.indexAfter(beforeId, (cmp) => cmp >= 0);
    const start = Math.max(0, end - limit);
    return Promise.resolve({ items: this.posts.slice(start, end).reverse(), hasMore: start > 0 });
  }

  readAfter(afterId: string, count: number): Promise<PostRecord[]> {
    const start = this.indexAfter(afterId, (cmp) => cmp > 0);
    return Promise.resolve(this.posts.slice(start, start + count));
  }

  /** The first index whose post compares to `id` as `accept` wants (binary search: ids are sorted). */
  private indexAfter(id: string, accept: (cmp: number) => boolean): number {
    let low = 0;
    let high = this.posts.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (accept(compareStreamIds((this.posts[mid] as PostRecord).id, id))) high = mid;
      else low = mid + 1;
    }
    return low;
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
    return Promise.resolve(record);
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
