import type { FeedSource } from '@agentroom/kit/store';
import type { EventRecord, NotificationRecord, NotifiedRemoval } from './notifications.js';
import type { MessagingStore } from './store.js';

/**
 * Removed posts' tombstones laid over notifications as they are read (docs/decisions.md §42): the
 * feeds keep each post as it was made, in each agent's own keys, and the removals are kept apart
 * (one key for the room, which a per-agent script cannot read on a Redis Cluster), so a read looks
 * them up after the feed answered.
 */

/** The notification as it reads once its post was removed: text '' and no mentions. */
export function redacted(notification: NotificationRecord, removals: ReadonlyMap<string, NotifiedRemoval>): NotificationRecord {
  if (notification.type === 'direct_message') return notification;
  const removal = removals.get(notification.post.id);
  if (removal === undefined) return notification;
  return { ...notification, post: { ...notification.post, text: '', mentions: [], removal } };
}

/** Each notification about a removed post, as its tombstone: one lookup for the lot. */
export async function redactAll(store: Pick<MessagingStore, 'removalsOf'>, notifications: readonly NotificationRecord[]): Promise<NotificationRecord[]> {
  const postIds = notifications.flatMap((notification) => (notification.type === 'direct_message' ? [] : [notification.post.id]));
  if (postIds.length === 0) return [...notifications];
  const removals = await store.removalsOf(postIds);
  return removals.size === 0 ? [...notifications] : notifications.map((notification) => redacted(notification, removals));
}

/**
 * A feed whose replays (readAfter) show tombstones. What it hands on live was appended a moment
 * ago, from the room's post as it stood then; a removal after that shows on every later read.
 */
export function redactedFeed<T extends { id: string }>(
  source: FeedSource<T>,
  store: Pick<MessagingStore, 'removalsOf'>,
  notificationOf: (item: T) => NotificationRecord,
  withNotification: (item: T, notification: NotificationRecord) => T,
): FeedSource<T> {
  return {
    async readAfter(afterId, count) {
      const items = await source.readAfter(afterId, count);
      const notifications = await redactAll(store, items.map(notificationOf));
      return items.map((item, i) => (notifications[i] === notificationOf(item) ? item : withNotification(item, notifications[i] as NotificationRecord)));
    },
    subscribe: (listener) => source.subscribe(listener),
  };
}

/** An agent's feed, redacted. */
export function redactedNotifications(store: MessagingStore, agentId: string): FeedSource<NotificationRecord> {
  return redactedFeed(
    store.notifications(agentId),
    store,
    (notification) => notification,
    (_item, notification) => notification,
  );
}

/** The global events feed (delivery's), redacted. */
export function redactedEvents(store: MessagingStore): FeedSource<EventRecord> {
  return redactedFeed(
    store.events(),
    store,
    (event) => event.notification,
    (event, notification) => ({ ...event, notification }),
  );
}
