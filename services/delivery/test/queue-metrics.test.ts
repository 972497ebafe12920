import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { createLogger } from '@agentroom/kit/log';
import { webhookQueueDepth, webhookQueueOldestAge } from '@agentroom/kit/metrics';
import { connectRedis, type Redis } from '@agentroom/kit/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisDeliveryStore } from '../src/store-redis.js';
import { newSecret, newWebhookId } from '../src/webhooks.js';
import { DeliveryWorker } from '../src/worker.js';
import { type Receiver, startReceiver } from './support.js';

const AGENT = 'a_queueage001';

let server: LocalRedis;
let redis: Redis;
let receiver: Receiver;

beforeAll(async () => {
  [server, receiver] = await Promise.all([startRedisServer(), startReceiver()]);
  redis = connectRedis(server.url, 'queue-metrics-test');
});

afterAll(async () => {
  await redis.quit();
  await Promise.all([server.stop(), receiver.close()]);
});

async function gauge(metric: typeof webhookQueueOldestAge): Promise<number> {
  return (await metric.get()).values[0]?.value ?? Number.NaN;
}

/** The queue's figures a delivery dashboard and the queue-age alert read, as the worker reports them. */
describe("delivery's queue gauges", () => {
  it('agentroom_webhook_queue_oldest_age_seconds grows while a delivery waits behind a slow one, and is 0 once the queue is empty', async () => {
    const store = new RedisDeliveryStore(redis, 'queue-age');
    const webhookId = newWebhookId();
    await store.createWebhook(
      {
        id: webhookId,
        agentId: AGENT,
        url: `${receiver.url}/slow`,
        events: ['direct_message'],
        enabled: true,
        disabledReason: '',
        createdAt: new Date().toISOString(),
        failuresInARow: 0,
        secret: newSecret(),
      },
      5,
    );
    // The endpoint holds every request until released: with one attempt at a time, the second job waits.
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    receiver.onRequest = () => held;
    const worker = new DeliveryWorker(store, createLogger('delivery', 'silent'), {
      concurrency: 1,
      promoteEveryMs: 50,
      blockMs: 100,
      timeoutMs: 10_000,
      policy: { allowLoopback: true, allowHttp: true },
    });
    const job = (n: number) => ({
      messageId: `msg_${n}_${webhookId}`,
      agentId: AGENT,
      webhookId,
      eventType: 'direct_message' as const,
      body: `{"n":${n}}`,
      createdAt: new Date().toISOString(),
      attempt: 1,
    });
    worker.start();
    try {
      await store.enqueue([job(1), job(2)]);
      await expect.poll(() => receiver.received.length, { timeout: 5_000 }).toBe(1);
      await expect.poll(() => gauge(webhookQueueOldestAge), { timeout: 5_000 }).toBeGreaterThan(0.3);
      const earlier = await gauge(webhookQueueOldestAge);
      await expect.poll(() => gauge(webhookQueueOldestAge), { timeout: 5_000 }).toBeGreaterThan(earlier + 0.2);
      expect(await gauge(webhookQueueDepth)).toBe(2);
      release();
      await expect.poll(() => receiver.received.length, { timeout: 5_000 }).toBe(2);
      await expect.poll(() => gauge(webhookQueueOldestAge), { timeout: 5_000 }).toBe(0);
      expect(await gauge(webhookQueueDepth)).toBe(0);
    } finally {
      release();
      receiver.onRequest = undefined;
      await worker.stop();
      await store.close();
    }
  }, 20_000);
});
