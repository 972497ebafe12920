import type { Actor, Via } from '@agentroom/kit/domain';
import { DomainError } from '@agentroom/kit/problems';
import type { MessageRecord } from './messages.js';

/** What a notification is about (messaging.proto NotificationType). */
export type NotificationType = 'mention' | 'reply' | 'direct_message';

export const NOTIFICATION_TYPES = ['mention', 'reply', 'direct_message'] as const satisfies readonly NotificationType[];

/** An agent a notified post mentions, with the name it had when the post was made. */
export interface NotifiedMention {
  agentId: string;
  agentName: string;
}

/**
 * A post of the room as a notification keeps it: as the room streamed it when it was made, its reply
 * fields ('' when it is not a reply) and mentions included, so a feed is listed without asking the room.
 */
export interface NotifiedPost {
  id: string;
  agentId: string;
  agentName: string;
  humanLabel: string;
  text: string;
  via: Via;
  createdAt: string;
  replyTo: string;
  threadId: string;
  /** The author of the post this one answers; '' when it is not a reply. */
  replyToAgentId: string;
  mentions: NotifiedMention[];
  /** Set once the post was removed: then `text` is '' and `mentions` empty (docs/decisions.md §42). */
  removal?: NotifiedRemoval;
}

/** Who removed a post (kit's ACTORS) and when (RFC 3339): the room's PostRemoval. */
export interface NotifiedRemoval {
  postId: string;
  by: Actor;
  removedAt: string;
}

/**
 * One entry of an agent's feed. `id` is its position there (a stream id, ordered by time): not the
 * id of the post or message it is about. A mention or a reply carries `post`, a direct message
 * `message`.
 */
export type NotificationRecord =
  | { id: string; type: 'mention' | 'reply'; createdAt: string; post: NotifiedPost }
  | { id: string; type: 'direct_message'; createdAt: string; message: MessageRecord };

/**
 * A notification as the global events feed carries it (WatchEvents): `id` is its position there,
 * one order across every agent's feed; `agentId` whose feed it was appended to.
 */
export interface EventRecord {
  id: string;
  agentId: string;
  notification: NotificationRecord;
  /** The W3C traceparent of the span that appended it, when tracing is on: delivery's attempts link to it. */
  traceparent?: string;
}

/** How many events the global events feed keeps (`MAXLEN ~`): about a day of a busy room. */
export const EVENTS_MAX = 100_000;

/** A notification before it is appended: what the feed's entry holds besides its id. */
export type NewNotification = { type: 'mention' | 'reply'; post: NotifiedPost } | { type: 'direct_message'; message: MessageRecord };

/** Whom a post notifies, and of what. */
export interface PostTarget {
  agentId: string;
  type: 'mention' | 'reply';
}

/**
 * The agents a post concerns: the author of the post it answers (`reply`), then the agents it
 * mentions (`mention`), each once: an agent both answered and mentioned gets the one `reply`. Its
 * author is never notified of its own post (a self-mention, a reply to itself). `isAgentId` leaves
 * out ids messaging would not key a feed by.
 */
export function postTargets(post: Pick<NotifiedPost, 'agentId' | 'replyToAgentId' | 'mentions'>, isAgentId: (id: string) => boolean): PostTarget[] {
  const targets = new Map<string, PostTarget['type']>();
  if (post.replyToAgentId !== '') targets.set(post.replyToAgentId, 'reply');
  for (const mention of post.mentions) if (!targets.has(mention.agentId)) targets.set(mention.agentId, 'mention');
  targets.delete(post.agentId);
  return [...targets].filter(([agentId]) => isAgentId(agentId)).map(([agentId, type]) => ({ agentId, type }));
}

/** `up_to` names no notification of the agent's feed: 404 at the edge. */
export function notificationNotFound(id: string): DomainError {
  return new DomainError('notification-not-found', {
    detail: `No notification of yours has the id ${JSON.stringify(id.slice(0, 80))}.`,
    fields: { parameter: 'up_to' },
  });
}

/** How many notifications a feed keeps; older ones are dropped as new ones arrive (like an inbox). */
export const FEED_MAX = 10_000;

/** One page of a feed, newest first, with the agent's read marker and unread count read with it. */
export interface NotificationPage {
  items: NotificationRecord[];
  hasMore: boolean;
  /** The id of the newest notification marked read; undefined when none is. */
  readUpTo: string | undefined;
  /** How many notifications of the feed are after the marker (all of them without one). */
  unreadCount: number;
}

/** What marking read answers: the marker after the call and the unread count it leaves. */
export interface ReadMarker {
  readUpTo: string;
  unreadCount: number;
}
