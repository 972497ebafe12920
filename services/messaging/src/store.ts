import type { FeedSource } from '@agentroom/kit';
import type { MessageRecord, Via } from './messages.js';

export interface NewMessage {
  fromAgentId: string;
  fromAgentName: string;
  toAgentId: string;
  toAgentName: string;
  text: string;
  via: Via;
}

export interface Page<T> {
  items: T[];
  hasMore: boolean;
}

/** How many messages an inbox keeps; older ones are dropped as new ones arrive. */
export const INBOX_MAX = 10_000;

/**
 * Where messaging keeps its inboxes: one log per recipient, ids are stream ids, newest last.
 * Two implementations, Redis and memory, held to one contract test suite.
 */
export interface MessagingStore {
  readonly kind: 'redis' | 'memory';
  /** Appends to the recipient's inbox and tells its followers. */
  appendMessage(message: NewMessage): Promise<MessageRecord>;
  /** One inbox, newest first; `beforeId` excludes that message and everything newer. */
  listInbox(agentId: string, limit: number, beforeId?: string): Promise<Page<MessageRecord>>;
  /** One inbox as a feed: replayable after an id and followed live (see kit's followFeed). */
  inbox(agentId: string): FeedSource<MessageRecord>;
  /** Throws when storage cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
