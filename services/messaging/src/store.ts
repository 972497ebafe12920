import type { FeedSource } from '@agentroom/kit/store';
import type { MessageRecord, Via } from './messages.js';
import type { EventRecord, NotificationPage, NotificationRecord, NotifiedPost, NotifiedRemoval, PostTarget, ReadMarker } from './notifications.js';

export interface NewMessage {
  fromAgentId: string;
  fromAgentName: string;
  toAgentId: string;
  toAgentName: string;
  text: string;
  via: Via;
  /**
   * The sender's name for this one message (SendMessage's call_key): a message from the same sender
   * to the same recipient with a key taken within kit's `CALL_KEY_MS` is not appended again; the
   * message sent then is answered instead.
   */
  callKey?: string;
}

/** What appendMessage did: the message it appended, or (`again`) the one its call key sent already, when nothing was appended now. */
export interface Sent {
  message: MessageRecord;
  again?: true;
}

export interface Page<T> {
  items: T[];
  hasMore: boolean;
}

/** How many messages an inbox keeps; older ones are dropped as new ones arrive. */
export const INBOX_MAX = 10_000;

/** What appending a post's notifications did: those appended, and the agents that already had one of that post. */
export interface PostNotified {
  appended: NotificationRecord[];
  repeated: string[];
}

/**
 * Where messaging keeps its inboxes and notification feeds: one log of each per agent, ids are
 * stream ids, newest last; and the notifier's lease and position. Two implementations, Redis and
 * memory, held to one contract test suite.
 */
export interface MessagingStore {
  readonly kind: 'redis' | 'memory';
  /**
   * Appends to the recipient's inbox and its `direct_message` notification to the recipient's feed,
   * in one step (neither exists without the other), and tells the followers of both. A `callKey` the
   * store took from the same sender to the same recipient within kit's `CALL_KEY_MS` appends nothing
   * and answers the message sent then (`again`); checked first, in the same step.
   */
  appendMessage(message: NewMessage): Promise<Sent>;
  /** One inbox, newest first; `beforeId` excludes that message and everything newer. */
  listInbox(agentId: string, limit: number, beforeId?: string): Promise<Page<MessageRecord>>;
  /** One inbox as a feed: replayable after an id and followed live (see kit's followFeed). */
  inbox(agentId: string): FeedSource<MessageRecord>;
  /**
   * Appends a post's notification to the feed of each target, at most once per (agent, post): an
   * agent whose feed already took this post, or a later one, is left alone (`repeated`). Posts are
   * handed over in the room's order (the notifier follows its feed), which is what makes "a later
   * one" mean "this one was handled".
   */
  notifyPost(post: NotifiedPost, targets: PostTarget[]): Promise<PostNotified>;
  /**
   * One agent's feed, newest first; `beforeId` excludes that notification and everything newer;
   * `unreadOnly` keeps those after the read marker. The marker and unread count are read in the
   * same step as the page.
   */
  listNotifications(agentId: string, limit: number, options?: { beforeId?: string; unreadOnly?: boolean }): Promise<NotificationPage>;
  /**
   * Moves the read marker to `upTo`, which must be a notification of the agent's feed (else
   * undefined), unless it is already there or later: the marker never moves backwards. One step.
   */
  markNotificationsRead(agentId: string, upTo: string): Promise<ReadMarker | undefined>;
  /** The read marker; undefined when nothing was marked read. */
  readMarker(agentId: string): Promise<string | undefined>;
  /** One agent's feed, replayable after an id and followed live (see kit's followFeed). */
  notifications(agentId: string): FeedSource<NotificationRecord>;
  /**
   * Every notification appended to any agent's feed, in one global order, as events (ids of their
   * own), replayable after an id and followed live. Capped at about EVENTS_MAX.
   */
  events(): FeedSource<EventRecord>;
  /**
   * Takes the notifier's lease for `owner` for `ttlMs`, or extends it when `owner` holds it
   * already; false while another owner holds it. A lease not extended in time lapses, and any owner
   * may take it then.
   */
  acquireNotifierLease(owner: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up, when `owner` holds it, so another replica takes over at once. */
  releaseNotifierLease(owner: string): Promise<void>;
  /** The id of the last post the notifier handled; undefined before it ever started. */
  notifierPosition(): Promise<string | undefined>;
  /**
   * Stores `postId` as the notifier's position, only while `owner` holds the lease (else false,
   * and nothing changes); a position never moves backwards.
   */
  advanceNotifierPosition(owner: string, postId: string): Promise<boolean>;
  /**
   * Notes a removed post (docs/decisions.md §42): every read of a notification about it shows its
   * tombstone from then on (redaction.ts lays it over what the feeds hold). The first removal of a
   * post stays; noting it again changes nothing.
   */
  redactPost(removal: NotifiedRemoval): Promise<void>;
  /** The removals noted of these posts, by post id; posts not removed are left out. */
  removalsOf(postIds: readonly string[]): Promise<Map<string, NotifiedRemoval>>;
  /** Throws when storage cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
