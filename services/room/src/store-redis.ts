import { duplicateClient, Keyspace, LuaScript, type RedisClient, type StreamEntry, streamFields, VIAS, type Via } from '@agentroom/kit';
import type { AgentRecord } from './agents.js';
import { createdAtOf, type PostRecord } from './posts.js';
import type { NewPost, Page, RoomStore } from './store.js';


/**
 * A post by the agent whose record is in the hash KEYS[1] under ARGV[1], appended to the stream
 * KEYS[2] with the name and label that record holds: one round trip, and no upsert can come between
 * the read and the append. Answers the new id, name and label, or nil when no such agent is kept.
 */
const APPEND_POST = new LuaScript(`
local json = redis.call('HGET', KEYS[1], ARGV[1])
if not json then return false end
local agent = cjson.decode(json)
local name = type(agent.agentName) == 'string' and agent.agentName or ''
local label = type(agent.humanLabel) == 'string' and agent.humanLabel or ''
local id = redis.call('XADD', KEYS[2], '*', 'agentId', ARGV[1], 'agentName', name, 'humanLabel', label, 'text', ARGV[2], 'via', ARGV[3])
return { id, name, label }
`);

/** The one room there is for now; the hash tag keeps all its keys in one cluster slot. */
const ROOM = 'main';

// How long one XREAD waits before it asks again; bounds how long a stopped follower lingers.
const BLOCK_MS = 5_000;

function toPost([id, fields]: StreamEntry): PostRecord {
  const map = streamFields(fields);
  const via = map.get('via') ?? 'rest';
  return {
    id,
    agentId: map.get('agentId') ?? '',
    agentName: map.get('agentName') ?? '',
    humanLabel: map.get('humanLabel') ?? '',
    text: map.get('text') ?? '',
    via: (VIAS as readonly string[]).includes(via) ? (via as Via) : 'rest',
    createdAt: createdAtOf(id),
  };
}

/**
 * The room in Redis: posts in one stream (`XADD`, ids are cursors), agents as JSON in a hash with a
 * sorted set by creation time. One blocking reader per process follows the stream for every
 * subscriber, so a thousand watchers cost one connection.
 */
export class RedisRoomStore implements RoomStore {
  readonly kind = 'redis';
  private readonly postsKey: string;
  private readonly agentsKey: string;
  private readonly agentsByTimeKey: string;
  private readonly listeners = new Set<(post: PostRecord) => void>();
  private reader: RedisClient | undefined;
  private following: Promise<string> | undefined;
  private closed = false;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    const keys = new Keyspace(prefix, 'room');
    this.postsKey = keys.key(ROOM, 'posts');
    this.agentsKey = keys.key(ROOM, 'agents');
    this.agentsByTimeKey = keys.key(ROOM, 'agents', 'by-time');
  }

  async appendPost(post: NewPost): Promise<PostRecord | undefined> {
    const appended = (await APPEND_POST.run(this.redis, [this.agentsKey, this.postsKey], [post.agentId, post.text, post.via])) as [string, string, string] | null;
    if (appended === null) return undefined;
    const [id, agentName, humanLabel] = appended;
    return { id, ...post, agentName, humanLabel, createdAt: createdAtOf(id) };
  }

  async listPosts(limit: number, beforeId?: string): Promise<Page<PostRecord>> {
    const end = beforeId === undefined ? '+' : `(${beforeId}`;
    const entries = (await this.redis.xrevrange(this.postsKey, end, '-', 'COUNT', limit + 1)) as StreamEntry[];
    return { items: entries.slice(0, limit).map(toPost), hasMore: entries.length > limit };
  }

  async readAfter(afterId: string, count: number): Promise<PostRecord[]> {
    const entries = (await this.redis.xrange(this.postsKey, `(${afterId}`, '+', 'COUNT', count)) as StreamEntry[];
    return entries.map(toPost);
  }

  async subscribe(listener: (post: PostRecord) => void): Promise<() => void> {
    this.listeners.add(listener);
    const unsubscribe = (): void => {
      this.listeners.delete(listener);
    };
    try {
      await (this.following ??= this.follow().catch((error: unknown) => {
        this.following = undefined;
        throw error;
      }));
    } catch (error) {
      unsubscribe();
      throw error;
    }
    return unsubscribe;
  }

  /** Starts the shared reader; resolves with the id it starts after, once that is fixed. */
  private async follow(): Promise<string> {
    const [latest] = (await this.redis.xrevrange(this.postsKey, '+', '-', 'COUNT', 1)) as StreamEntry[];
    const start = latest?.[0] ?? '0-0';
    if (!this.reader) {
      this.reader = duplicateClient(this.redis, 'room-feed');
      this.reader.on('error', () => undefined); // the read loop retries; the main connection reports outages
    }
    void this.readLoop(this.reader, start);
    return start;
  }

  private async readLoop(reader: RedisClient, start: string): Promise<void> {
    let last = start;
    while (!this.closed) {
      try {
        const reply = (await reader.xread('COUNT', 500, 'BLOCK', BLOCK_MS, 'STREAMS', this.postsKey, last)) as
          | [string, StreamEntry[]][]
          | null;
        for (const [, entries] of reply ?? []) {
          for (const entry of entries) {
            last = entry[0];
            const post = toPost(entry);
            for (const listener of this.listeners) listener(post);
          }
        }
      } catch {
        if (this.closed) return;
        // Redis went away: wait and resume from the last id seen, so nothing is skipped.
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  }

  async upsertAgent(agent: AgentRecord): Promise<AgentRecord> {
    const existing = await this.getAgent(agent.id);
    const record = { ...agent, createdAt: existing?.createdAt ?? agent.createdAt };
    await this.redis
      .multi()
      .hset(this.agentsKey, agent.id, JSON.stringify(record))
      .zadd(this.agentsByTimeKey, 'NX', Date.parse(record.createdAt), agent.id)
      .exec();
    return record;
  }

  async getAgent(id: string): Promise<AgentRecord | undefined> {
    const json = await this.redis.hget(this.agentsKey, id);
    return json === null ? undefined : (JSON.parse(json) as AgentRecord);
  }

  async listAgents(limit: number, includeRevoked = false): Promise<Page<AgentRecord>> {
    // Newest first, in batches, until one more than the page is found: revoked agents may be skipped.
    const found: AgentRecord[] = [];
    const batch = Math.max(2 * (limit + 1), 50);
    for (let offset = 0; found.length <= limit; offset += batch) {
      const ids = await this.redis.zrevrange(this.agentsByTimeKey, offset, offset + batch - 1);
      if (ids.length === 0) break;
      const records = await this.redis.hmget(this.agentsKey, ...ids);
      for (const json of records) {
        if (json === null) continue;
        const agent = JSON.parse(json) as AgentRecord;
        if (includeRevoked || agent.revokedAt === undefined) found.push(agent);
      }
      if (ids.length < batch) break;
    }
    return { items: found.slice(0, limit), hasMore: found.length > limit };
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    this.reader?.disconnect();
  }
}
