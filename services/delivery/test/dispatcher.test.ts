import { EventEmitter } from 'node:events';
import type { ClientReadableStream } from '@grpc/grpc-js';
import { createLogger } from '@agentroom/kit/log';
import type { WatchEventsResponse__Output } from '@agentroom/proto';
import { describe, expect, it } from 'vitest';
import { Dispatcher, type EventType, MemoryDeliveryStore, messageIdOf, type WebhookRecord } from '../src/index.js';

/** messaging's WatchEvents as grpc-js hands it over: positioned at once, then `send` writes events. */
class FakeWatch extends EventEmitter {
  private paused = false;
  pause(): this {
    this.paused = true;
    return this;
  }
  resume(): this {
    this.paused = false;
    return this;
  }
  isPaused(): boolean {
    return this.paused;
  }
  cancel(): void {}
}

const TYPES: Record<EventType, string> = {
  mention: 'NOTIFICATION_TYPE_MENTION',
  reply: 'NOTIFICATION_TYPE_REPLY',
  direct_message: 'NOTIFICATION_TYPE_DIRECT_MESSAGE',
};

/** Later than the position a new deployment starts from (now), so every event counts. */
const LATER = Date.now() + 60_000;

/** The nth event of the feed: a direct message (or a mention) to `agentId`. */
function event(n: number, agentId: string, type: 'mention' | 'direct_message'): WatchEventsResponse__Output {
  const id = `${LATER + n}-0`;
  const createdAt = new Date(LATER + n).toISOString();
  const message = {
    id: `m${n}`,
    fromAgentId: 'z',
    fromAgentName: 'zed',
    toAgentId: agentId,
    toAgentName: agentId,
    text: `hello ${n}`,
    via: 'VIA_REST',
    createdAt,
  };
  const post = {
    id: `p${n}`,
    agentId: 'z',
    agentName: 'zed',
    humanLabel: 'Ada',
    text: `@${agentId} ${n}`,
    via: 'VIA_REST',
    createdAt,
    replyTo: '',
    threadId: '',
    replyCount: 0,
    mentions: [],
  };
  return {
    id,
    agentId,
    notification: {
      id,
      type: TYPES[type],
      createdAt,
      read: false,
      post: type === 'mention' ? post : null,
      message: type === 'direct_message' ? message : null,
    },
  } as unknown as WatchEventsResponse__Output;
}

function webhook(agentId: string, id: string, events: EventType[], createdAt: string): WebhookRecord {
  return { id, agentId, url: `https://example.com/${id}`, events, enabled: true, disabledReason: '', createdAt, failuresInARow: 0, secret: 'whsec_c2VjcmV0' };
}

describe('Dispatcher', () => {
  it("queues a burst of events in one step: one job per subscribed endpoint, in the events' order, each agent's endpoints read once", async () => {
    const store = new MemoryDeliveryStore();
    await store.createWebhook(webhook('alice', 'wh_a1', ['mention', 'direct_message'], '2026-01-01T00:00:00.000Z'), 5);
    await store.createWebhook(webhook('alice', 'wh_a2', ['direct_message'], '2026-01-01T00:00:01.000Z'), 5);
    await store.createWebhook(webhook('bob', 'wh_b1', ['mention'], '2026-01-01T00:00:00.000Z'), 5);
    let reads = 0;
    const listWebhooks = store.listWebhooks.bind(store);
    store.listWebhooks = (agentId) => {
      reads += 1;
      return listWebhooks(agentId);
    };
    const watches: FakeWatch[] = [];
    const messaging = {
      watchEvents: () => {
        const call = new FakeWatch();
        watches.push(call);
        setImmediate(() => call.emit('metadata'));
        return call as unknown as ClientReadableStream<WatchEventsResponse__Output>;
      },
    };
    const dispatcher = new Dispatcher(store, messaging.watchEvents, createLogger('test', 'silent'), { leaseMs: 1_000, retryMs: 20 });
    dispatcher.start();
    try {
      await expect.poll(() => dispatcher.isFollowing).toBe(true);
      const agents = ['alice', 'bob', 'carol'];
      const events = Array.from({ length: 30 }, (_, i) => event(i + 1, agents[i % 3] as string, i % 2 === 0 ? 'direct_message' : 'mention'));
      for (const e of events) watches[0]?.emit('data', e);
      await expect.poll(() => store.position()).toBe(events.at(-1)?.id);

      const expected = events.flatMap((e) => {
        const type = e.notification?.message ? 'direct_message' : 'mention';
        if (e.agentId === 'alice') return (type === 'mention' ? ['wh_a1'] : ['wh_a1', 'wh_a2']).map((id) => messageIdOf(e.id, id));
        if (e.agentId === 'bob' && type === 'mention') return [messageIdOf(e.id, 'wh_b1')];
        return [];
      });
      const queued = await store.claim('worker', 1_000, undefined, 0);
      expect(queued.map(({ job }) => job.messageId)).toEqual(expected);
      for (const { job } of queued) {
        const body = JSON.parse(job.body) as { type: string; data: { id: string } };
        expect(job.eventType).toBe(body.type);
        expect(job.messageId).toBe(messageIdOf(body.data.id, job.webhookId));
      }
      // The 30 events came at once: one batch, so each of the three agents' endpoints read once.
      expect(reads).toBe(3);
    } finally {
      await dispatcher.stop();
    }
  });
});
