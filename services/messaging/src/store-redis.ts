import { compareStreamIds, duplicateClient, type FeedSource, Keyspace, LuaScript, type RedisClient, type StreamEntry, streamFields, VIAS } from '@agentroom/kit';
import { z } from 'zod';
import { createdAtOf, type MessageRecord } from './messages.js';
import { INBOX_MAX, type MessagingStore, type NewMessage, type Page } from './store.js';


// XADD and PUBLISH in one script, so a follower that subscribed first is told of every message
// appended after it. ARGV: cap, channel, the message as JSON (without id), then the stream fields.
const SEND = new LuaScript(`
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 4))
redis.call('PUBLISH', ARGV[2], id .. ' ' .. ARGV[3])
return id
`);

const REPLAY_PAGE = 200;

// What a published message carries after its id: the record without id and createdAt.
const published = z.object({
  fromAgentId: z.string(),
  fromAgentName: z.string(),
  toAgentId: z.string(),
  toAgentName: z.string(),
  text: z.string(),
  via: z.enum(VIAS),
});

function toMessage([id, fields]: StreamEntry): MessageRecord {
  const map = streamFields(fields);
  const via = map.get('via') ?? 'rest';
  return {
    id,
    fromAgentId: map.get('fromAgentId') ?? '',
    fromAgentName: map.get('fromAgentName') ?? '',
    toAgentId: map.get('toAgentId') ?? '',
    toAgentName: map.get('toAgentName') ?? '',
    text: map.get('text') ?? '',
    via: (VIAS as readonly string[]).includes(via) ? (via as MessageRecord['via']) : 'rest',
    createdAt: createdAtOf(id),
  };
}

function fromPublished(payload: string): MessageRecord | undefined {
  const space = payload.indexOf(' ');
  if (space < 0) return undefined;
  const id = payload.slice(0, space);
  try {
    const parsed = published.safeParse(JSON.parse(payload.slice(space + 1)));
    return parsed.success ? { id, ...parsed.data, createdAt: createdAtOf(id) } : undefined;
  } catch {
    return undefined;
  }
}

/** The watchers of one inbox in this process, sharing one channel subscription. */
interface Followers {
  readonly agentId: string;
  readonly listeners: Set<(message: MessageRecord) => void>;
  /** The newest id handed out (at first: the inbox's newest when following began); nothing at or before it is handed out again. */
  last: string | undefined;
  /** Published messages waiting while the position is fixed, or fixed again after a reconnect. */
  held: MessageRecord[] | undefined;
  ready: Promise<void>;
}

/**
 * Inboxes in Redis: one stream per recipient (`XADD ... MAXLEN ~ cap`, ids are cursors), and a
 * channel per inbox on which each send is published in the same script. One shared subscriber
 * connection per process follows every watched inbox; after it reconnects, each inbox catches up
 * with XRANGE from the last id it handed out, so nothing is missed.
 */
export class RedisMessagingStore implements MessagingStore {
  readonly kind = 'redis';
  private readonly keys: Keyspace;
  private readonly followers = new Map<string, Followers>();
  private subscriber: RedisClient | undefined;
  private closed = false;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    private readonly maxLength = INBOX_MAX,
  ) {
    this.keys = new Keyspace(prefix, 'messaging');
  }

  /** `<prefix>:messaging:{<agentId>}:inbox`: the hash tag keeps an inbox and its channel in one slot. */
  private inboxKey(agentId: string): string {
    return this.keys.key(agentId, 'inbox');
  }

  private channelOf(agentId: string): string {
    return this.keys.key(agentId, 'inbox', 'live');
  }

  async appendMessage(message: NewMessage): Promise<MessageRecord> {
    const fields = ['fromAgentId', message.fromAgentId, 'fromAgentName', message.fromAgentName, 'toAgentId', message.toAgentId, 'toAgentName', message.toAgentName, 'text', message.text, 'via', message.via];
    const id = await SEND.run(this.redis, [this.inboxKey(message.toAgentId)], [String(this.maxLength), this.channelOf(message.toAgentId), JSON.stringify(message), ...fields]);
    if (typeof id !== 'string') throw new Error('XADD returned no id');
    return { id, ...message, createdAt: createdAtOf(id) };
  }

  async listInbox(agentId: string, limit: number, beforeId?: string): Promise<Page<MessageRecord>> {
    const end = beforeId === undefined ? '+' : `(${beforeId}`;
    const entries = (await this.redis.xrevrange(this.inboxKey(agentId), end, '-', 'COUNT', limit + 1)) as StreamEntry[];
    return { items: entries.slice(0, limit).map(toMessage), hasMore: entries.length > limit };
  }

  private async readAfter(agentId: string, afterId: string, count: number): Promise<MessageRecord[]> {
    const entries = (await this.redis.xrange(this.inboxKey(agentId), `(${afterId}`, '+', 'COUNT', count)) as StreamEntry[];
    return entries.map(toMessage);
  }

  inbox(agentId: string): FeedSource<MessageRecord> {
    return {
      readAfter: (afterId, count) => this.readAfter(agentId, afterId, count),
      subscribe: (listener) => this.subscribe(agentId, listener),
    };
  }

  private async subscribe(agentId: string, listener: (message: MessageRecord) => void): Promise<() => void> {
    const channel = this.channelOf(agentId);
    let followers = this.followers.get(channel);
    if (!followers) {
      const created: Followers = { agentId, listeners: new Set(), last: undefined, held: [], ready: Promise.resolve() };
      this.followers.set(channel, created);
      created.ready = this.startFollowing(channel, created);
      followers = created;
    }
    const joined = followers;
    joined.listeners.add(listener);
    const unsubscribe = (): void => this.leave(channel, joined, listener);
    try {
      await joined.ready;
    } catch (error) {
      unsubscribe();
      throw error;
    }
    return unsubscribe;
  }

  /** Subscribes to the inbox's channel, then fixes the position: the inbox's newest id at that moment. */
  private async startFollowing(channel: string, followers: Followers): Promise<void> {
    try {
      await this.subscriberConnection().subscribe(channel);
      const [latest] = (await this.redis.xrevrange(this.inboxKey(followers.agentId), '+', '-', 'COUNT', 1)) as StreamEntry[];
      followers.last = latest?.[0] ?? '0-0';
      this.release(followers);
    } catch (error) {
      followers.held = undefined;
      if (this.followers.get(channel) === followers) {
        this.followers.delete(channel);
        this.subscriber?.unsubscribe(channel).catch(() => undefined);
      }
      throw error;
    }
  }

  private leave(channel: string, followers: Followers, listener: (message: MessageRecord) => void): void {
    followers.listeners.delete(listener);
    if (followers.listeners.size > 0 || this.followers.get(channel) !== followers) return;
    this.followers.delete(channel);
    this.subscriber?.unsubscribe(channel).catch(() => undefined);
  }

  private subscriberConnection(): RedisClient {
    if (this.subscriber) return this.subscriber;
    // Resubscribing is ours to do (refollow), so that each inbox catches up right after it.
    const subscriber = duplicateClient(this.redis, 'messaging-inboxes', { autoResubscribe: false });
    subscriber.on('error', () => undefined); // the main connection reports outages; refollow recovers
    subscriber.on('message', (channel: string, payload: string) => {
      const followers = this.followers.get(channel);
      if (!followers) {
        // Left subscribed by a reconnect racing the last watcher's leave: nobody here wants it.
        subscriber.unsubscribe(channel).catch(() => undefined);
        return;
      }
      const message = fromPublished(payload);
      if (!message) return;
      if (followers.held) followers.held.push(message);
      else this.emit(followers, message);
    });
    let connected = false;
    subscriber.on('ready', () => {
      if (connected) void this.refollow(subscriber);
      connected = true;
    });
    this.subscriber = subscriber;
    return subscriber;
  }

  /** After a reconnect: subscribe again, then read what each inbox got meanwhile, then what was published since. */
  private async refollow(subscriber: RedisClient): Promise<void> {
    const all = [...this.followers.entries()];
    if (all.length === 0 || this.closed) return;
    const positioned = all.map(([, followers]) => followers).filter((followers) => followers.last !== undefined);
    for (const followers of positioned) followers.held ??= [];
    try {
      await subscriber.subscribe(...all.map(([channel]) => channel));
      for (const followers of positioned) {
        for (;;) {
          const page = await this.readAfter(followers.agentId, followers.last ?? '0-0', REPLAY_PAGE);
          for (const message of page) this.emit(followers, message);
          if (page.length < REPLAY_PAGE) break;
        }
      }
    } catch {
      // Redis went away again: the next reconnect catches up from the same positions.
    } finally {
      for (const followers of positioned) this.release(followers);
    }
  }

  private release(followers: Followers): void {
    const held = followers.held ?? [];
    followers.held = undefined;
    for (const message of held) this.emit(followers, message);
  }

  /** Hands a message to the inbox's watchers once, in id order. */
  private emit(followers: Followers, message: MessageRecord): void {
    if (followers.last !== undefined && compareStreamIds(message.id, followers.last) <= 0) return;
    followers.last = message.id;
    for (const listener of followers.listeners) listener(message);
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.followers.clear();
    this.subscriber?.disconnect();
  }
}
