import { MemoryCallKeys } from '@agentroom/kit/grpc';
import { compareStreamIds, type Clock, type FeedItem, type FeedSource, StreamIds, systemClock, MemoryLeaseStore } from '@agentroom/kit/store';
import { createdAtOf, type MessageRecord } from './messages.js';
import {
  EVENTS_MAX,
  type EventRecord,
  FEED_MAX,
  type NewNotification,
  type NotificationPage,
  type NotificationRecord,
  type NotifiedPost,
  type NotifiedRemoval,
  type PostTarget,
  type ReadMarker,
} from './notifications.js';
import { INBOX_MAX, type MessagingStore, type NewMessage, type Page, type PostNotified, SENT_MAX, type Sent } from './store.js';
import { currentTraceparent } from '@agentroom/kit/telemetry';

/** One agent's log (its inbox, or its feed), oldest first, capped, with its live followers. */
class Log<T extends FeedItem> {
  readonly items: T[] = [];
  readonly listeners = new Set<(item: T) => void>();

  constructor(private readonly maxLength: number) {}

  append(item: T): void {
    this.items.push(item);
    if (this.items.length > this.maxLength) this.items.splice(0, this.items.length - this.maxLength);
  }

  tell(item: T): void {
    for (const listener of this.listeners) listener(item);
  }

  /** Newest first, before `beforeId` (exclusive) and after `afterId` (exclusive), at most `limit`. */
  newestFirst(limit: number, beforeId?: string, afterId?: string): Page<T> {
    const end = beforeId === undefined ? this.items.length : indexWhere(this.items, beforeId, (cmp) => cmp >= 0);
    const floor = afterId === undefined ? 0 : indexWhere(this.items, afterId, (cmp) => cmp > 0);
    const start = Math.max(floor, end - limit);
    return { items: this.items.slice(start, end).reverse(), hasMore: start > floor };
  }

  readAfter(afterId: string, count: number): T[] {
    const start = indexWhere(this.items, afterId, (cmp) => cmp > 0);
    return this.items.slice(start, start + count);
  }

  /** How many items are after `afterId` (all of them without one). */
  countAfter(afterId: string | undefined): number {
    return afterId === undefined ? this.items.length : this.items.length - indexWhere(this.items, afterId, (cmp) => cmp > 0);
  }

  has(id: string): boolean {
    return this.find(id) !== undefined;
  }

  find(id: string): T | undefined {
    const item = this.items[indexWhere(this.items, id, (cmp) => cmp >= 0)];
    return item?.id === id ? item : undefined;
  }
}

/** An agent's notification feed and its state: the read marker, and the newest post it took (repeats of it, or of older ones, are left out). */
interface Feed {
  log: Log<NotificationRecord>;
  readUpTo: string | undefined;
  lastPost: string | undefined;
}

/**
 * The embedded default: inboxes, feeds and the notifier's state in this process's memory, lost on
 * restart (health says degraded). Ids are made exactly like Redis stream ids, so cursors and
 * resumption behave the same.
 */
export class MemoryMessagingStore implements MessagingStore {
  readonly kind = 'memory';
  private readonly inboxes = new Map<string, Log<MessageRecord>>();
  /** What each agent sent, oldest first, the last SENT_MAX. */
  private readonly sent = new Map<string, Log<MessageRecord>>();
  private readonly feeds = new Map<string, Feed>();
  /** Who follows the room's posts now, and where the notifier is. */
  private readonly lease: MemoryLeaseStore;
  /** Ids made as Redis makes stream ids, so the feed's positions read the same in both stores. */
  private readonly ids = new StreamIds(() => this.clock.now());
  /** The global events feed: every notification appended, with ids of its own. */
  private readonly eventLog: Log<EventRecord>;
  private readonly eventIds = new StreamIds(() => this.clock.now());
  /** The call keys of the last minute, as `<sender> <recipient> <key>`, each with the message it sent. */
  private readonly callKeys = new MemoryCallKeys(() => this.clock.now());
  /** The removed posts, by id: laid over every notification about them as it is read. */
  private readonly removals = new Map<string, NotifiedRemoval>();

  constructor(
    private readonly clock: Clock = systemClock,
    private readonly maxLength = INBOX_MAX,
    private readonly feedMaxLength = FEED_MAX,
    eventsMaxLength = EVENTS_MAX,
  ) {
    this.eventLog = new Log(eventsMaxLength);
    this.lease = new MemoryLeaseStore(clock);
  }

  private inboxOf(agentId: string): Log<MessageRecord> {
    let inbox = this.inboxes.get(agentId);
    if (!inbox) this.inboxes.set(agentId, (inbox = new Log(this.maxLength)));
    return inbox;
  }

  private feedOf(agentId: string): Feed {
    let feed = this.feeds.get(agentId);
    if (!feed) this.feeds.set(agentId, (feed = { log: new Log(this.feedMaxLength), readUpTo: undefined, lastPost: undefined }));
    return feed;
  }

  /** Appends to a feed without telling its followers yet (the caller tells them once every write of its step is done). */
  private appendNotification(feed: Feed, notification: NewNotification): NotificationRecord {
    const id = this.ids.next();
    const record = { id, createdAt: createdAtOf(id), ...notification } as NotificationRecord;
    feed.log.append(record);
    return record;
  }

  /** Appends a notification's event to the global events feed and tells its followers: in the same step as the notification. */
  private appendEvent(agentId: string, notification: NotificationRecord): void {
    const event: EventRecord = { id: this.eventIds.next(), agentId, notification, ...currentTraceparent() };
    this.eventLog.append(event);
    this.eventLog.tell(event);
  }

  appendMessage(message: NewMessage): Promise<Sent> {
    const { callKey: key, ...fields } = message;
    const callKey = key ? `${message.fromAgentId} ${message.toAgentId} ${key}` : undefined;
    const sentId = callKey === undefined ? undefined : this.callKeys.made(callKey);
    const sent = sentId === undefined ? undefined : this.inboxes.get(message.toAgentId)?.find(sentId);
    if (sent) return Promise.resolve({ message: sent, again: true });
    const id = this.ids.next();
    const record: MessageRecord = { id, ...fields, createdAt: createdAtOf(id) };
    if (callKey !== undefined) this.callKeys.take(callKey, id);
    const inbox = this.inboxOf(message.toAgentId);
    inbox.append(record);
    let log = this.sent.get(message.fromAgentId);
    if (!log) this.sent.set(message.fromAgentId, (log = new Log(SENT_MAX)));
    log.append(record);
    const feed = this.feedOf(message.toAgentId);
    const notification = this.appendNotification(feed, { type: 'direct_message', message: record });
    inbox.tell(record);
    feed.log.tell(notification);
    this.appendEvent(message.toAgentId, notification);
    return Promise.resolve({ message: record });
  }

  listSent(agentId: string, limit: number): Promise<MessageRecord[]> {
    return Promise.resolve(this.sent.get(agentId)?.newestFirst(limit).items ?? []);
  }

  listInbox(agentId: string, limit: number, beforeId?: string): Promise<Page<MessageRecord>> {
    return Promise.resolve(this.inboxes.get(agentId)?.newestFirst(limit, beforeId) ?? { items: [], hasMore: false });
  }

  inbox(agentId: string): FeedSource<MessageRecord> {
    return this.source(
      () => this.inboxes.get(agentId),
      () => this.inboxOf(agentId),
      (inbox) => {
        // A watched inbox that never got a message is not kept once nobody watches it.
        if (inbox.listeners.size === 0 && inbox.items.length === 0) this.inboxes.delete(agentId);
      },
    );
  }

  notifyPost(post: NotifiedPost, targets: PostTarget[]): Promise<PostNotified> {
    const appended: NotificationRecord[] = [];
    const repeated: string[] = [];
    for (const target of targets) {
      const feed = this.feedOf(target.agentId);
      if (feed.lastPost !== undefined && compareStreamIds(post.id, feed.lastPost) <= 0) {
        repeated.push(target.agentId);
        continue;
      }
      feed.lastPost = post.id;
      const record = this.appendNotification(feed, { type: target.type, post });
      appended.push(record);
      feed.log.tell(record);
      this.appendEvent(target.agentId, record);
    }
    return Promise.resolve({ appended, repeated });
  }

  listNotifications(agentId: string, limit: number, options: { beforeId?: string; unreadOnly?: boolean } = {}): Promise<NotificationPage> {
    const feed = this.feeds.get(agentId);
    if (!feed) return Promise.resolve({ items: [], hasMore: false, readUpTo: undefined, unreadCount: 0 });
    const page = feed.log.newestFirst(limit, options.beforeId, options.unreadOnly ? feed.readUpTo : undefined);
    return Promise.resolve({ ...page, readUpTo: feed.readUpTo, unreadCount: feed.log.countAfter(feed.readUpTo) });
  }

  markNotificationsRead(agentId: string, upTo: string): Promise<ReadMarker | undefined> {
    const feed = this.feeds.get(agentId);
    if (!feed?.log.has(upTo)) return Promise.resolve(undefined);
    if (feed.readUpTo === undefined || compareStreamIds(upTo, feed.readUpTo) > 0) feed.readUpTo = upTo;
    return Promise.resolve({ readUpTo: feed.readUpTo, unreadCount: feed.log.countAfter(feed.readUpTo) });
  }

  readMarker(agentId: string): Promise<string | undefined> {
    return Promise.resolve(this.feeds.get(agentId)?.readUpTo);
  }

  notifications(agentId: string): FeedSource<NotificationRecord> {
    return this.source(
      () => this.feeds.get(agentId)?.log,
      () => this.feedOf(agentId).log,
      (log) => {
        const feed = this.feeds.get(agentId);
        if (feed?.log === log && log.listeners.size === 0 && log.items.length === 0 && feed.readUpTo === undefined && feed.lastPost === undefined)
          this.feeds.delete(agentId);
      },
    );
  }

  events(): FeedSource<EventRecord> {
    return this.source(
      () => this.eventLog,
      () => this.eventLog,
      () => undefined,
    );
  }

  /** A log as a feed: `existing` to read (nothing when absent), `create` to follow, `left` after a follower leaves. */
  private source<T extends FeedItem>(existing: () => Log<T> | undefined, create: () => Log<T>, left: (log: Log<T>) => void): FeedSource<T> {
    return {
      readAfter: (afterId, count) => Promise.resolve(existing()?.readAfter(afterId, count) ?? []),
      subscribe: (listener) => {
        const log = create();
        log.listeners.add(listener);
        return Promise.resolve(() => {
          log.listeners.delete(listener);
          left(log);
        });
      },
    };
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

  redactPost(removal: NotifiedRemoval): Promise<void> {
    if (!this.removals.has(removal.postId)) this.removals.set(removal.postId, { ...removal });
    return Promise.resolve();
  }

  removalsOf(postIds: readonly string[]): Promise<Map<string, NotifiedRemoval>> {
    const found = new Map<string, NotifiedRemoval>();
    for (const id of postIds) {
      const removal = this.removals.get(id);
      if (removal) found.set(id, { ...removal });
    }
    return Promise.resolve(found);
  }

  ping(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    for (const inbox of this.inboxes.values()) inbox.listeners.clear();
    for (const feed of this.feeds.values()) feed.log.listeners.clear();
    this.eventLog.listeners.clear();
    return Promise.resolve();
  }
}

/** The first index whose item compares to `id` as `accept` wants (binary search: ids are sorted). */
function indexWhere(items: readonly FeedItem[], id: string, accept: (cmp: number) => boolean): number {
  let low = 0;
  let high = items.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (accept(compareStreamIds((items[mid] as FeedItem).id, id))) high = mid;
    else low = mid + 1;
  }
  return low;
}
