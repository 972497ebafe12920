import { VIAS } from '@agentroom/kit/domain';
import { CALL_KEY_MS } from '@agentroom/kit/grpc';
import { notificationEventsLost } from '@agentroom/kit/metrics';
import {
  COMPARE_STREAM_IDS_LUA,
  compareStreamIds,
  duplicateClient,
  type FeedItem,
  type FeedSource,
  Keyspace,
  LuaScript,
  type RedisClient,
  type StreamEntry,
  streamFields,
  RedisLeaseStore,
} from '@agentroom/kit/store';
import { z } from 'zod';
import { createdAtOf, type MessageRecord } from './messages.js';
import {
  EVENTS_MAX,
  type EventRecord,
  FEED_MAX,
  type NotificationPage,
  type NotificationRecord,
  type NotifiedPost,
  type NotifiedRemoval,
  type PostTarget,
  type ReadMarker,
} from './notifications.js';
import { INBOX_MAX, type MessagingStore, type NewMessage, type Page, type PostNotified, SENT_MAX, type Sent } from './store.js';
import { currentTraceparent } from '@agentroom/kit/telemetry';

/**
 * Lua: appends a notification to the stream `feed` (capped at `cap`), numbering it in the feed's
 * state hash `state` (`added`: how many it ever took; the entry keeps its number as `n`, so the
 * unread count is a subtraction, however the cap trimmed the feed), and publishes it on `channel` as
 * `<id> <type> <message id or -> <JSON>`. Answers its id.
 */
const APPEND_NOTIFICATION = `
local function appendNotification(feed, state, cap, channel, kind, messageId, json)
  local n = redis.call('HINCRBY', state, 'added', 1)
  local id
  if messageId == '-' then
    id = redis.call('XADD', feed, 'MAXLEN', '~', cap, '*', 'n', n, 'type', kind, 'post', json)
  else
    id = redis.call('XADD', feed, 'MAXLEN', '~', cap, '*', 'n', n, 'type', kind, 'messageId', messageId, 'message', json)
  end
  redis.call('PUBLISH', channel, id .. ' ' .. kind .. ' ' .. messageId .. ' ' .. json)
  return id
end
`;

// A message to the inbox KEYS[1] and its direct_message notification to the recipient's feed KEYS[2]
// (state KEYS[3]), in one script: neither exists without the other, and a follower that subscribed
// first is told of both. KEYS[4] is the call key (in the recipient's slot): while it holds a message
// id (ARGV[6] ms after the call that took it; 0 for a call without a key), nothing is sent and the
// script answers {'again', that id}. ARGV: inbox cap, inbox channel, the message as JSON (without
// id), feed cap, feed channel, call key ttl, then the message's stream fields.
const SEND = new LuaScript(`${APPEND_NOTIFICATION}
local ttl = tonumber(ARGV[6])
if ttl > 0 then
  local sent = redis.call('GET', KEYS[4])
  if sent then return { 'again', sent } end
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 7))
if ttl > 0 then redis.call('SET', KEYS[4], id, 'PX', ttl) end
redis.call('PUBLISH', ARGV[2], id .. ' ' .. ARGV[3])
local nid = appendNotification(KEYS[2], KEYS[3], ARGV[4], ARGV[5], 'direct_message', id, ARGV[3])
return { id, nid }
`);

// A notification's event to the global events stream KEYS[1] (capped at ARGV[1]), published on
// ARGV[2] as `<event id> <agent id> <notification id> <type> <message id or -> <traceparent or -> <JSON>`.
// ARGV: cap, channel, agent id, notification id, type, message id or '-', the post's or message's
// JSON, the W3C traceparent of the span appending it or '-' (tracing off: no `traceparent` field).
const APPEND_EVENT = new LuaScript(`
local fields
if ARGV[6] == '-' then
  fields = { 'agentId', ARGV[3], 'nid', ARGV[4], 'type', ARGV[5], 'post', ARGV[7] }
else
  fields = { 'agentId', ARGV[3], 'nid', ARGV[4], 'type', ARGV[5], 'messageId', ARGV[6], 'message', ARGV[7] }
end
if ARGV[8] ~= '-' then
  table.insert(fields, 'traceparent')
  table.insert(fields, ARGV[8])
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(fields))
redis.call('PUBLISH', ARGV[2], id .. ' ' .. ARGV[3] .. ' ' .. ARGV[4] .. ' ' .. ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. ARGV[8] .. ' ' .. ARGV[7])
return id
`);

// A post's notification to one agent's feed KEYS[1] (state KEYS[2]), unless the feed already took
// this post or a later one (`lastPost` in the state): then nothing, and nil. ARGV: cap, channel,
// post id, type, post JSON.
const NOTIFY_POST = new LuaScript(`${COMPARE_STREAM_IDS_LUA}${APPEND_NOTIFICATION}
local last = redis.call('HGET', KEYS[2], 'lastPost')
if last and compareIds(ARGV[3], last) <= 0 then return false end
redis.call('HSET', KEYS[2], 'lastPost', ARGV[3])
return appendNotification(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[4], '-', ARGV[5])
`);

// The unread count of the feed KEYS[1] with the state `state` (HMGET readUpTo, readN, added): all of
// it without a marker; else those numbered after the marked one, of those the cap has kept.
const UNREAD = `
local function unread(state)
  local length = redis.call('XLEN', KEYS[1])
  if not state[1] then return length end
  return math.min(length, tonumber(state[3] or '0') - tonumber(state[2] or '0'))
end
`;

// A page of the feed KEYS[1], newest first from ARGV[1] (an XREVRANGE end), at most ARGV[2] entries,
// only those after the read marker when ARGV[3] is '1'; with the marker and the unread count of the
// same moment: { entries, marker or '', unread }.
const LIST_NOTIFICATIONS = new LuaScript(`${UNREAD}
local state = redis.call('HMGET', KEYS[2], 'readUpTo', 'readN', 'added')
local floor = '-'
if ARGV[3] == '1' and state[1] then floor = '(' .. state[1] end
local entries = redis.call('XREVRANGE', KEYS[1], ARGV[1], floor, 'COUNT', ARGV[2])
return { entries, state[1] or '', unread(state) }
`);

// Moves the read marker of the feed KEYS[1] (state KEYS[2]) to ARGV[1], an id of the feed (else nil),
// unless the marker is there or later already: { marker, unread }.
const MARK_READ = new LuaScript(`${COMPARE_STREAM_IDS_LUA}${UNREAD}
local entry = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])[1]
if not entry or entry[1] ~= ARGV[1] then return false end
local state = redis.call('HMGET', KEYS[2], 'readUpTo', 'readN', 'added')
if not state[1] or compareIds(ARGV[1], state[1]) > 0 then
  local n = '0'
  for i = 1, #entry[2] - 1, 2 do
    if entry[2][i] == 'n' then n = entry[2][i + 1] end
  end
  redis.call('HSET', KEYS[2], 'readUpTo', ARGV[1], 'readN', n)
  state[1], state[2] = ARGV[1], n
end
return { state[1], unread(state) }
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

// A post as a notification keeps it (notifications.ts NotifiedPost).
const notifiedPost = z.object({
  id: z.string(),
  agentId: z.string(),
  agentName: z.string(),
  humanLabel: z.string(),
  text: z.string(),
  via: z.enum(VIAS),
  createdAt: z.string(),
  replyTo: z.string(),
  threadId: z.string(),
  replyToAgentId: z.string(),
  mentions: z.array(z.object({ agentId: z.string(), agentName: z.string() })),
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

/** `<id> <JSON>` as a send publishes it, or as the feed's script does after its type and message id. */
function messageOf(id: string, json: string): MessageRecord | undefined {
  try {
    const parsed = published.safeParse(JSON.parse(json));
    return parsed.success ? { id, ...parsed.data, createdAt: createdAtOf(id) } : undefined;
  } catch {
    return undefined;
  }
}

function postOf(json: string): NotifiedPost | undefined {
  try {
    const parsed = notifiedPost.safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** A feed entry, from its stream fields or its published parts; undefined when it is not one (never written so). */
function toNotification(id: string, type: string | undefined, messageId: string | undefined, json: string | undefined): NotificationRecord | undefined {
  if (json === undefined) return undefined;
  const createdAt = createdAtOf(id);
  if (type === 'direct_message') {
    const message = messageId === undefined ? undefined : messageOf(messageId, json);
    return message && { id, type, createdAt, message };
  }
  if (type !== 'mention' && type !== 'reply') return undefined;
  const post = postOf(json);
  return post && { id, type, createdAt, post };
}

function fromEntry([id, fields]: StreamEntry): NotificationRecord | undefined {
  const map = streamFields(fields);
  return toNotification(id, map.get('type'), map.get('messageId'), map.get('post') ?? map.get('message'));
}

function toNotifications(entries: StreamEntry[]): NotificationRecord[] {
  return entries.flatMap((entry) => fromEntry(entry) ?? []);
}

/** An entry of the global events stream; undefined when it is not one. */
function toEvents(entries: StreamEntry[]): EventRecord[] {
  return entries.flatMap(([id, fields]) => {
    const map = streamFields(fields);
    const agentId = map.get('agentId');
    const notification = toNotification(map.get('nid') ?? '', map.get('type'), map.get('messageId'), map.get('post') ?? map.get('message'));
    const traceparent = map.get('traceparent');
    return agentId === undefined || notification === undefined ? [] : [{ id, agentId, notification, ...(traceparent === undefined ? {} : { traceparent }) }];
  });
}

/** Splits `a b c rest` into its first `count` words and the rest (which may hold spaces). */
function words(payload: string, count: number): string[] | undefined {
  const parts: string[] = [];
  let from = 0;
  for (let i = 0; i < count; i += 1) {
    const space = payload.indexOf(' ', from);
    if (space < 0) return undefined;
    parts.push(payload.slice(from, space));
    from = space + 1;
  }
  return [...parts, payload.slice(from)];
}

/** How one kind of log is read, published and parsed, for the followers of one agent's log of it. */
interface LogKind<T extends FeedItem> {
  /** The newest id of the log now ('0-0' when empty). */
  latest(): Promise<string>;
  readAfter(afterId: string, count: number): Promise<T[]>;
  parse(payload: string): T | undefined;
}

/** The watchers of one log (an inbox, a feed) in this process, sharing one channel subscription. */
interface Followers<T extends FeedItem> {
  readonly kind: LogKind<T>;
  readonly listeners: Set<(item: T) => void>;
  /** The newest id handed out (at first: the log's newest when following began); nothing at or before it is handed out again. */
  last: string | undefined;
  /** Published items waiting while the position is fixed, or fixed again after a reconnect. */
  held: T[] | undefined;
  ready: Promise<void>;
}

/**
 * Inboxes and notification feeds in Redis: one stream of each per agent (`XADD ... MAXLEN ~ cap`,
 * ids are cursors), and a channel per stream on which each append is published in the same script.
 * Every key of an agent carries its `{<agent id>}` hash tag, so a message and its notification are
 * written by one script on a Redis Cluster too. One shared subscriber connection per process follows
 * every watched stream; after it reconnects, each catches up with XRANGE from the last id it handed
 * out, so nothing is missed. The notifier's lease and position are under the `{notifier}` tag.
 *
 * The global events feed (WatchEvents) is one more stream, under the `{events}` tag: a notification's
 * script cannot write it on a Redis Cluster (another slot), so its event is appended by a second
 * command right after. Between the two lies a window of one round trip: should the process die, or
 * Redis become unreachable, just then, the notification is in the agent's feed and not in the events
 * feed (no webhook for it); `agentroom_notification_events_lost_total` counts the failures seen.
 */
export class RedisMessagingStore implements MessagingStore {
  readonly kind = 'redis';
  private readonly keys: Keyspace;
  private readonly followers = new Map<string, Followers<FeedItem>>();
  /** Who follows the feed now, and where it is: one slot, as kit's RedisLeaseStore needs. */
  private readonly lease: RedisLeaseStore;
  private readonly eventsKey: string;
  private readonly eventsChannel: string;
  /** The removed posts (post id → JSON NotifiedRemoval): one hash for the room, read after each feed read (docs/decisions.md §42). */
  private readonly removalsKey: string;
  private subscriber: RedisClient | undefined;
  private closed = false;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    private readonly maxLength = INBOX_MAX,
    private readonly feedMaxLength = FEED_MAX,
    private readonly eventsMaxLength = EVENTS_MAX,
  ) {
    this.keys = new Keyspace(prefix, 'messaging');
    this.eventsKey = this.keys.key('events', 'stream');
    this.eventsChannel = this.keys.key('events', 'stream', 'live');
    this.removalsKey = this.keys.key('removed-posts');
    this.lease = new RedisLeaseStore(this.redis, this.keys.key('notifier', 'lease'), this.keys.key('notifier', 'position'));
  }

  /** `<prefix>:messaging:{<agentId>}:inbox`: the hash tag keeps an agent's inbox, feed and their channels in one slot. */
  private inboxKey(agentId: string): string {
    return this.keys.key(agentId, 'inbox');
  }

  private inboxChannel(agentId: string): string {
    return this.keys.key(agentId, 'inbox', 'live');
  }

  /** `<prefix>:messaging:{<agentId>}:sent`: the last SENT_MAX messages the agent sent, newest first, as JSON. */
  private sentKey(agentId: string): string {
    return this.keys.key(agentId, 'sent');
  }

  private feedKey(agentId: string): string {
    return this.keys.key(agentId, 'notifications');
  }

  private feedChannel(agentId: string): string {
    return this.keys.key(agentId, 'notifications', 'live');
  }

  /** The feed's read marker, the number of its last marked entry, how many it took, and the newest post it took. */
  private stateKey(agentId: string): string {
    return this.keys.key(agentId, 'notifications', 'state');
  }

  async appendMessage(message: NewMessage): Promise<Sent> {
    const { callKey: key, ...sent } = message;
    const to = message.toAgentId;
    const fields = [
      'fromAgentId',
      message.fromAgentId,
      'fromAgentName',
      message.fromAgentName,
      'toAgentId',
      to,
      'toAgentName',
      message.toAgentName,
      'text',
      message.text,
      'via',
      message.via,
    ];
    const json = JSON.stringify({
      fromAgentId: message.fromAgentId,
      fromAgentName: message.fromAgentName,
      toAgentId: to,
      toAgentName: message.toAgentName,
      text: message.text,
      via: message.via,
    });
    // Without a call key the script still needs a key name there, in the same slot; it is not read.
    const callKey = key ? this.keys.key(to, 'inbox', 'call', message.fromAgentId, key) : this.keys.key(to, 'inbox', 'call');
    const keys = [this.inboxKey(to), this.feedKey(to), this.stateKey(to), callKey];
    // Acknowledged once the replicas asked for have it (docs/decisions.md §20).
    const answer = await SEND.runAcknowledged(this.redis, keys, [
      String(this.maxLength),
      this.inboxChannel(to),
      json,
      String(this.feedMaxLength),
      this.feedChannel(to),
      key ? String(CALL_KEY_MS) : '0',
      ...fields,
    ]);
    const reply = Array.isArray(answer) ? (answer as unknown[]) : [];
    if (reply[0] === 'again' && typeof reply[1] === 'string') return { message: await this.sentBefore(to, reply[1]), again: true };
    const [id, notificationId] = reply;
    if (typeof id !== 'string' || typeof notificationId !== 'string') throw new Error('XADD returned no id');
    await this.appendEvent(to, notificationId, 'direct_message', id, json);
    const record: MessageRecord = { id, ...sent, createdAt: createdAtOf(id) };
    // The sender's log is in the sender's slot, not the recipient's: a step of its own, after the send.
    const sentKey = this.sentKey(message.fromAgentId);
    const logged = await this.redis
      .multi()
      .lpush(sentKey, `${id} ${json}`)
      .ltrim(sentKey, 0, SENT_MAX - 1)
      .exec();
    for (const [error] of logged ?? []) if (error) throw error;
    return { message: record };
  }

  async listSent(agentId: string, limit: number): Promise<MessageRecord[]> {
    // Each entry as a send publishes it: `<id> <JSON>`.
    const entries = await this.redis.lrange(this.sentKey(agentId), 0, limit - 1);
    return entries.flatMap((entry) => {
      const space = entry.indexOf(' ');
      const message = space < 0 ? undefined : messageOf(entry.slice(0, space), entry.slice(space + 1));
      return message ? [message] : [];
    });
  }

  /**
   * The message a repeated call's first call sent (`sentId`, in `to`'s inbox). That call appended its
   * event too, or died before it: a loss appendEvent already counts.
   */
  private async sentBefore(to: string, sentId: string): Promise<MessageRecord> {
    const [entry] = (await this.redis.xrange(this.inboxKey(to), sentId, sentId)) as StreamEntry[];
    // Trimmed between the two: only an inbox cap far smaller than a minute's messages does that.
    if (entry?.[0] !== sentId) throw new Error(`the message ${sentId} its call key sent is gone already`);
    return toMessage(entry);
  }

  async listInbox(agentId: string, limit: number, beforeId?: string): Promise<Page<MessageRecord>> {
    const end = beforeId === undefined ? '+' : `(${beforeId}`;
    const entries = (await this.redis.xrevrange(this.inboxKey(agentId), end, '-', 'COUNT', limit + 1)) as StreamEntry[];
    return { items: entries.slice(0, limit).map(toMessage), hasMore: entries.length > limit };
  }

  inbox(agentId: string): FeedSource<MessageRecord> {
    return this.source(this.inboxChannel(agentId), {
      latest: () => this.latest(this.inboxKey(agentId)),
      readAfter: async (afterId, count) =>
        ((await this.redis.xrange(this.inboxKey(agentId), `(${afterId}`, '+', 'COUNT', count)) as StreamEntry[]).map(toMessage),
      parse: (payload) => {
        const [id, json] = words(payload, 1) ?? [];
        return id === undefined || json === undefined ? undefined : messageOf(id, json);
      },
    });
  }

  async notifyPost(post: NotifiedPost, targets: PostTarget[]): Promise<PostNotified> {
    const json = JSON.stringify(post);
    // Each agent's feed is its own slot: one script per agent, all at once.
    const ids = await Promise.all(
      targets.map((target) =>
        NOTIFY_POST.run(
          this.redis,
          [this.feedKey(target.agentId), this.stateKey(target.agentId)],
          [String(this.feedMaxLength), this.feedChannel(target.agentId), post.id, target.type, json],
        ),
      ),
    );
    const notified: PostNotified = { appended: [], repeated: [] };
    targets.forEach((target, i) => {
      const id = ids[i];
      if (typeof id === 'string') notified.appended.push({ id, type: target.type, createdAt: createdAtOf(id), post });
      else notified.repeated.push(target.agentId);
    });
    await Promise.all(
      targets.flatMap((target, i) => {
        const id = ids[i];
        return typeof id === 'string' ? [this.appendEvent(target.agentId, id, target.type, '-', json)] : [];
      }),
    );
    return notified;
  }

  async listNotifications(agentId: string, limit: number, options: { beforeId?: string; unreadOnly?: boolean } = {}): Promise<NotificationPage> {
    const end = options.beforeId === undefined ? '+' : `(${options.beforeId}`;
    const [entries, marker, unread] = (await LIST_NOTIFICATIONS.run(
      this.redis,
      [this.feedKey(agentId), this.stateKey(agentId)],
      [end, String(limit + 1), options.unreadOnly ? '1' : '0'],
    )) as [StreamEntry[], string, number];
    return {
      items: toNotifications(entries.slice(0, limit)),
      hasMore: entries.length > limit,
      readUpTo: marker === '' ? undefined : marker,
      unreadCount: Number(unread),
    };
  }

  async markNotificationsRead(agentId: string, upTo: string): Promise<ReadMarker | undefined> {
    const marked = (await MARK_READ.run(this.redis, [this.feedKey(agentId), this.stateKey(agentId)], [upTo])) as [string, number] | null;
    return marked === null ? undefined : { readUpTo: marked[0], unreadCount: Number(marked[1]) };
  }

  async readMarker(agentId: string): Promise<string | undefined> {
    return (await this.redis.hget(this.stateKey(agentId), 'readUpTo')) ?? undefined;
  }

  notifications(agentId: string): FeedSource<NotificationRecord> {
    return this.source(this.feedChannel(agentId), {
      latest: () => this.latest(this.feedKey(agentId)),
      readAfter: async (afterId, count) =>
        toNotifications((await this.redis.xrange(this.feedKey(agentId), `(${afterId}`, '+', 'COUNT', count)) as StreamEntry[]),
      parse: (payload) => {
        const [id, type, messageId, json] = words(payload, 3) ?? [];
        return id === undefined ? undefined : toNotification(id, type, messageId, json);
      },
    });
  }

  /**
   * The second step of an append: the notification's event, to the global events stream. Its
   * failure is counted, not thrown: the notification itself is stored, and a caller told otherwise
   * would send its message again.
   */
  private async appendEvent(agentId: string, notificationId: string, type: string, messageId: string, json: string): Promise<void> {
    try {
      const traceparent = currentTraceparent().traceparent ?? '-';
      await APPEND_EVENT.run(
        this.redis,
        [this.eventsKey],
        [String(this.eventsMaxLength), this.eventsChannel, agentId, notificationId, type, messageId, json, traceparent],
      );
    } catch {
      notificationEventsLost.inc();
    }
  }

  events(): FeedSource<EventRecord> {
    return this.source(this.eventsChannel, {
      latest: () => this.latest(this.eventsKey),
      readAfter: async (afterId, count) => toEvents((await this.redis.xrange(this.eventsKey, `(${afterId}`, '+', 'COUNT', count)) as StreamEntry[]),
      parse: (payload) => {
        const [id, agentId, notificationId, type, messageId, traceparent, json] = words(payload, 6) ?? [];
        if (id === undefined || agentId === undefined || notificationId === undefined) return undefined;
        const notification = toNotification(notificationId, type, messageId, json);
        return notification && { id, agentId, notification, ...(traceparent === undefined || traceparent === '-' ? {} : { traceparent }) };
      },
    });
  }

  acquireNotifierLease(owner: string, ttlMs: number): Promise<boolean> {
    return this.lease.acquireLease(owner, ttlMs);
  }

  releaseNotifierLease(owner: string): Promise<void> {
    return this.lease.releaseLease(owner);
  }

  notifierPosition(): Promise<string | undefined> {
    return this.lease.position();
  }

  advanceNotifierPosition(owner: string, postId: string): Promise<boolean> {
    return this.lease.advancePosition(owner, postId);
  }

  private async latest(key: string): Promise<string> {
    const [newest] = (await this.redis.xrevrange(key, '+', '-', 'COUNT', 1)) as StreamEntry[];
    return newest?.[0] ?? '0-0';
  }

  /** A log followed through its channel, sharing this process's subscriber connection. */
  private source<T extends FeedItem>(channel: string, kind: LogKind<T>): FeedSource<T> {
    return {
      readAfter: (afterId, count) => kind.readAfter(afterId, count),
      subscribe: (listener) => this.subscribe(channel, kind, listener),
    };
  }

  private async subscribe<T extends FeedItem>(channel: string, kind: LogKind<T>, listener: (item: T) => void): Promise<() => void> {
    let followers = this.followers.get(channel) as Followers<T> | undefined;
    if (!followers) {
      const created: Followers<T> = { kind, listeners: new Set(), last: undefined, held: [], ready: Promise.resolve() };
      this.followers.set(channel, created as unknown as Followers<FeedItem>);
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

  /** Subscribes to the log's channel, then fixes the position: the log's newest id at that moment. */
  private async startFollowing<T extends FeedItem>(channel: string, followers: Followers<T>): Promise<void> {
    try {
      await this.subscriberConnection().subscribe(channel);
      followers.last = await followers.kind.latest();
      this.release(followers);
    } catch (error) {
      followers.held = undefined;
      if (this.followers.get(channel) === (followers as unknown as Followers<FeedItem>)) {
        this.followers.delete(channel);
        this.subscriber?.unsubscribe(channel).catch(() => undefined);
      }
      throw error;
    }
  }

  private leave<T extends FeedItem>(channel: string, followers: Followers<T>, listener: (item: T) => void): void {
    followers.listeners.delete(listener);
    if (followers.listeners.size > 0 || this.followers.get(channel) !== (followers as unknown as Followers<FeedItem>)) return;
    this.followers.delete(channel);
    this.subscriber?.unsubscribe(channel).catch(() => undefined);
  }

  private subscriberConnection(): RedisClient {
    if (this.subscriber) return this.subscriber;
    // Resubscribing is ours to do (refollow), so that each log catches up right after it.
    const subscriber = duplicateClient(this.redis, 'messaging-inboxes', { autoResubscribe: false });
    subscriber.on('message', (channel: string, payload: string) => {
      const followers = this.followers.get(channel);
      if (!followers) {
        // Left subscribed by a reconnect racing the last watcher's leave: nobody here wants it.
        subscriber.unsubscribe(channel).catch(() => undefined);
        return;
      }
      const item = followers.kind.parse(payload);
      if (!item) return;
      if (followers.held) followers.held.push(item);
      else this.emit(followers, item);
    });
    let connected = false;
    subscriber.on('ready', () => {
      if (connected) void this.refollow(subscriber);
      connected = true;
    });
    this.subscriber = subscriber;
    return subscriber;
  }

  /** After a reconnect: subscribe again, then read what each log got meanwhile, then what was published since. */
  private async refollow(subscriber: RedisClient): Promise<void> {
    const all = [...this.followers.entries()];
    if (all.length === 0 || this.closed) return;
    const positioned = all.map(([, followers]) => followers).filter((followers) => followers.last !== undefined);
    for (const followers of positioned) followers.held ??= [];
    try {
      await subscriber.subscribe(...all.map(([channel]) => channel));
      for (const followers of positioned) {
        for (;;) {
          const page = await followers.kind.readAfter(followers.last ?? '0-0', REPLAY_PAGE);
          for (const item of page) this.emit(followers, item);
          if (page.length < REPLAY_PAGE) break;
        }
      }
    } catch {
      // Redis went away again: the next reconnect catches up from the same positions.
    } finally {
      for (const followers of positioned) this.release(followers);
    }
  }

  private release<T extends FeedItem>(followers: Followers<T>): void {
    const held = followers.held ?? [];
    followers.held = undefined;
    for (const item of held) this.emit(followers, item);
  }

  /** Hands an item to the log's watchers once, in id order. */
  private emit<T extends FeedItem>(followers: Followers<T>, item: T): void {
    if (followers.last !== undefined && compareStreamIds(item.id, followers.last) <= 0) return;
    followers.last = item.id;
    for (const listener of followers.listeners) listener(item);
  }

  async redactPost(removal: NotifiedRemoval): Promise<void> {
    await this.redis.hsetnx(this.removalsKey, removal.postId, JSON.stringify(removal));
  }

  async removalsOf(postIds: readonly string[]): Promise<Map<string, NotifiedRemoval>> {
    const found = new Map<string, NotifiedRemoval>();
    const ids = [...new Set(postIds)];
    if (ids.length === 0) return found;
    // Its own slot, not the feeds': read after them, never inside a feed's script.
    const kept = await this.redis.hmget(this.removalsKey, ...ids);
    ids.forEach((id, i) => {
      const json = kept[i];
      if (json === null || json === undefined) return;
      const parsed = JSON.parse(json) as Partial<NotifiedRemoval>;
      if (typeof parsed.removedAt !== 'string') return;
      found.set(id, { postId: id, by: parsed.by === 'human' ? 'human' : 'moderator', removedAt: parsed.removedAt });
    });
    return found;
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
