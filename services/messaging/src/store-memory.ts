import { compareStreamIds, type Clock, type FeedSource, StreamIds, systemClock } from '@agentroom/kit';
import { createdAtOf, type MessageRecord } from './messages.js';
import { INBOX_MAX, type MessagingStore, type NewMessage, type Page } from './store.js';

interface Inbox {
  messages: MessageRecord[];
  listeners: Set<(message: MessageRecord) => void>;
}

/**
 * The embedded default: inboxes in this process's memory, lost on restart (health says degraded).
 * Ids are made exactly like Redis stream ids, so cursors and resumption behave the same.
 */
export class MemoryMessagingStore implements MessagingStore {
  readonly kind = 'memory';
  private readonly inboxes = new Map<string, Inbox>();
  /** Ids made as Redis makes stream ids, so the feed's positions read the same in both stores. */
  private readonly ids = new StreamIds(() => this.clock.now());

  constructor(
    private readonly clock: Clock = systemClock,
    private readonly maxLength = INBOX_MAX,
  ) {}

  private inboxOf(agentId: string): Inbox {
    let inbox = this.inboxes.get(agentId);
    if (!inbox) {
      inbox = { messages: [], listeners: new Set() };
      this.inboxes.set(agentId, inbox);
    }
    return inbox;
  }

  appendMessage(message: NewMessage): Promise<MessageRecord> {
    const id = this.ids.next();
    const record: MessageRecord = { id, ...message, createdAt: createdAtOf(id) };
    const inbox = this.inboxOf(message.toAgentId);
    inbox.messages.push(record);
    if (inbox.messages.length > this.maxLength) inbox.messages.splice(0, inbox.messages.length - this.maxLength);
    for (const listener of inbox.listeners) listener(record);
    return Promise.resolve(record);
  }

  listInbox(agentId: string, limit: number, beforeId?: string): Promise<Page<MessageRecord>> {
    const messages = this.inboxes.get(agentId)?.messages ?? [];
    let end = messages.length;
    if (beforeId !== undefined) end = indexWhere(messages, beforeId, (cmp) => cmp >= 0);
    const start = Math.max(0, end - limit);
    return Promise.resolve({ items: messages.slice(start, end).reverse(), hasMore: start > 0 });
  }

  inbox(agentId: string): FeedSource<MessageRecord> {
    return {
      readAfter: (afterId, count) => {
        const messages = this.inboxes.get(agentId)?.messages ?? [];
        const start = indexWhere(messages, afterId, (cmp) => cmp > 0);
        return Promise.resolve(messages.slice(start, start + count));
      },
      subscribe: (listener) => {
        const inbox = this.inboxOf(agentId);
        inbox.listeners.add(listener);
        return Promise.resolve(() => {
          inbox.listeners.delete(listener);
          // A watched inbox that never got a message is not kept once nobody watches it.
          if (inbox.listeners.size === 0 && inbox.messages.length === 0) this.inboxes.delete(agentId);
        });
      },
    };
  }

  ping(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    for (const inbox of this.inboxes.values()) inbox.listeners.clear();
    return Promise.resolve();
  }
}

/** The first index whose message compares to `id` as `accept` wants (binary search: ids are sorted). */
function indexWhere(messages: MessageRecord[], id: string, accept: (cmp: number) => boolean): number {
  let low = 0;
  let high = messages.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (accept(compareStreamIds((messages[mid] as MessageRecord).id, id))) high = mid;
    else low = mid + 1;
  }
  return low;
}
