import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { type Cluster, connectRedis, connectRedisCluster, keysMatching, type Redis } from '@agentroom/kit/store';
import { type LocalRedisCluster, startRedisCluster } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryStore } from '../src/store.js';
import { MemoryDeliveryStore } from '../src/store-memory.js';
import { RedisDeliveryStore } from '../src/store-redis.js';
import { type AttemptRecord, type DeliveryJob, FAILURES_REASON, GONE_REASON, newSecret, newWebhookId, type WebhookRecord } from '../src/webhooks.js';

let redisServer: LocalRedis;
let redis: Redis;
/** One three-master Redis Cluster for the whole file. */
let cluster: LocalRedisCluster;
let clusterClient: Cluster;
let prefixes = 0;
const opened: DeliveryStore[] = [];

beforeAll(async () => {
  [redisServer, cluster] = await Promise.all([startRedisServer(), startRedisCluster()]);
  redis = connectRedis(redisServer.url, 'delivery-store-test');
  clusterClient = connectRedisCluster(cluster.nodes, 'delivery-store-test');
});

afterAll(async () => {
  for (const store of opened) await store.close();
  await redis.quit();
  await redisServer.stop();
  await clusterClient.quit();
  await cluster.stop();
});

function track<T extends DeliveryStore>(store: T): T {
  opened.push(store);
  return store;
}

const implementations: [string, () => DeliveryStore][] = [
  ['memory', () => track(new MemoryDeliveryStore())],
  ['redis', () => track(new RedisDeliveryStore(redis, `ds${(prefixes += 1)}`))],
  ['redis cluster', () => track(new RedisDeliveryStore(clusterClient, `ds${(prefixes += 1)}`))],
];

const ALICE = 'a_alice000001';
const BOB = 'a_bob00000001';
let made = 0;

function webhook(agentId = ALICE, extra: Partial<WebhookRecord> = {}): WebhookRecord {
  made += 1;
  return {
    id: newWebhookId(),
    agentId,
    url: `https://hooks.example.com/${made}`,
    events: ['mention', 'direct_message'],
    enabled: true,
    disabledReason: '',
    createdAt: new Date(Date.now() + made).toISOString(),
    failuresInARow: 0,
    secret: newSecret(),
    ...extra,
  };
}

function attempt(n: number, extra: Partial<AttemptRecord> = {}): AttemptRecord {
  return {
    messageId: `msg_${n}`,
    eventType: 'mention',
    status: 500,
    error: 'the endpoint answered 500',
    at: new Date().toISOString(),
    attempt: n,
    durationMs: 3,
    ...extra,
  };
}

function job(n: number, extra: Partial<DeliveryJob> = {}): DeliveryJob {
  return {
    messageId: `msg_${n}-0_wh`,
    agentId: ALICE,
    webhookId: 'wh_x',
    eventType: 'mention',
    body: `{"n":${n},"text":"😀 \\"q\\""}`,
    createdAt: new Date().toISOString(),
    attempt: 1,
    ...extra,
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe.each(implementations)('DeliveryStore contract, endpoints: %s', (_name, makeStore) => {
  it("keeps an agent's endpoints, oldest first, at most the number allowed; another agent's id finds nothing", async () => {
    const store = makeStore();
    const hooks = [webhook(), webhook(), webhook()];
    for (const hook of hooks) expect(await store.createWebhook(hook, 3)).toBe(true);
    expect(await store.createWebhook(webhook(), 3)).toBe(false);
    expect(await store.createWebhook(webhook(BOB), 3)).toBe(true);
    expect(await store.listWebhooks(ALICE)).toEqual(hooks);
    expect(await store.getWebhook(ALICE, hooks[1]!.id)).toEqual(hooks[1]);
    expect(await store.getWebhook(BOB, hooks[1]!.id)).toBeUndefined();
    expect(await store.listWebhooks('a_nobody00001')).toEqual([]);
  });

  it('deletes an endpoint with its attempts; deleting it again, or as another agent, finds nothing', async () => {
    const store = makeStore();
    const hook = webhook();
    await store.createWebhook(hook, 5);
    await store.recordAttempt(ALICE, hook.id, attempt(1), 'failed', 20);
    expect(await store.deleteWebhook(BOB, hook.id)).toBe(false);
    expect(await store.deleteWebhook(ALICE, hook.id)).toBe(true);
    expect(await store.deleteWebhook(ALICE, hook.id)).toBe(false);
    expect(await store.listWebhooks(ALICE)).toEqual([]);
    expect(await store.recentAttempts(ALICE, hook.id)).toEqual([]);
    expect(await store.recordAttempt(ALICE, hook.id, attempt(2), 'failed', 20)).toBeUndefined();
  });

  it('rotates a secret, and enables an endpoint again with its count reset', async () => {
    const store = makeStore();
    const hook = webhook();
    await store.createWebhook(hook, 5);
    const secret = newSecret();
    expect(await store.setSecret(ALICE, hook.id, secret)).toEqual({ ...hook, secret });
    expect((await store.getWebhook(ALICE, hook.id))?.secret).toBe(secret);
    await store.recordAttempt(ALICE, hook.id, attempt(1, { status: 410 }), 'gone', 20);
    expect(await store.getWebhook(ALICE, hook.id)).toMatchObject({ enabled: false, disabledReason: GONE_REASON, failuresInARow: 1 });
    expect(await store.enableWebhook(ALICE, hook.id)).toEqual({ ...hook, secret, enabled: true, disabledReason: '', failuresInARow: 0 });
    expect(await store.setSecret(BOB, hook.id, secret)).toBeUndefined();
    expect(await store.enableWebhook(ALICE, newWebhookId())).toBeUndefined();
  });

  it('counts failures in a row across deliveries, resets them on a success, and disables at the limit, once', async () => {
    const store = makeStore();
    const hook = webhook();
    await store.createWebhook(hook, 5);
    expect(await store.recordAttempt(ALICE, hook.id, attempt(1), 'failed', 3)).toEqual({ disabled: false });
    expect(await store.recordAttempt(ALICE, hook.id, attempt(2), 'failed', 3)).toEqual({ disabled: false });
    expect(await store.recordAttempt(ALICE, hook.id, attempt(3, { status: 200, error: '' }), 'delivered', 3)).toEqual({ disabled: false });
    expect((await store.getWebhook(ALICE, hook.id))?.failuresInARow).toBe(0);
    for (let i = 4; i <= 5; i += 1) expect(await store.recordAttempt(ALICE, hook.id, attempt(i), 'failed', 3)).toEqual({ disabled: false });
    expect(await store.recordAttempt(ALICE, hook.id, attempt(6), 'failed', 3)).toEqual({ disabled: true });
    expect(await store.recordAttempt(ALICE, hook.id, attempt(7), 'failed', 3)).toEqual({ disabled: false });
    expect(await store.getWebhook(ALICE, hook.id)).toEqual({ ...hook, enabled: false, disabledReason: FAILURES_REASON, failuresInARow: 4 });
  });

  it('keeps the last 20 attempts of an endpoint, newest first, exactly as recorded', async () => {
    const store = makeStore();
    const hook = webhook();
    await store.createWebhook(hook, 5);
    const all = Array.from({ length: 23 }, (_, i) =>
      attempt(i + 1, {
        eventType: i % 2 === 0 ? 'test' : 'reply',
        status: i === 22 ? 0 : 503,
        error: i === 22 ? 'Refused an outbound request to x: it is a private address.' : 'the endpoint answered 503',
      }),
    );
    for (const one of all) await store.recordAttempt(ALICE, hook.id, one, 'failed', 100);
    expect(await store.recentAttempts(ALICE, hook.id)).toEqual(all.slice(3).reverse());
  });
});

describe.each(implementations)('DeliveryStore contract, queue: %s', (_name, makeStore) => {
  it('hands each job to one consumer, in order; a job not acked is taken over by another after the idle time, an acked one never', async () => {
    const store = makeStore();
    const jobs = [job(1), job(2), job(3)];
    await store.enqueue(jobs);
    expect(await store.depth()).toBe(3);
    const a = await store.claim('worker-a', 2, 60_000, 0);
    expect(a.map((q) => q.job)).toEqual(jobs.slice(0, 2));
    const b = await store.claim('worker-b', 5, 60_000, 0);
    expect(b.map((q) => q.job)).toEqual(jobs.slice(2));
    // Nothing new, nothing idle long enough.
    expect(await store.claim('worker-b', 5, 60_000, 0)).toEqual([]);
    await store.ack(a[0]!.entryId);
    await store.ack(b[0]!.entryId);
    expect(await store.depth()).toBe(1);
    await sleep(250);
    // Without an idle time, new jobs only: nothing, though job 2 has been idle long enough.
    expect(await store.claim('worker-b', 5, undefined, 0)).toEqual([]);
    // worker-a died holding job 2: worker-b takes it after 200 ms idle.
    const takenOver = await store.claim('worker-b', 5, 200, 0);
    expect(takenOver.map((q) => q.job)).toEqual([jobs[1]]);
    expect(await store.claim('worker-c', 5, 60_000, 0)).toEqual([]);
    await store.ack(takenOver[0]!.entryId);
    expect(await store.depth()).toBe(0);
    await sleep(250);
    expect(await store.claim('worker-c', 5, 200, 0)).toEqual([]);
  });

  it('says how long its oldest job has waited: one queued (in flight too) since it was queued, a retry since it fell due, 0 when none', async () => {
    const store = makeStore();
    expect(await store.oldestAgeMs(Date.now())).toBe(0);
    const before = Date.now();
    await store.enqueue([job(1), job(2)]);
    const after = Date.now();
    await sleep(200);
    let now = Date.now();
    // Each queued at a time between before and after: its age now lies between.
    expect(await store.oldestAgeMs(now)).toBeGreaterThanOrEqual(now - after);
    expect(await store.oldestAgeMs(now)).toBeLessThanOrEqual(now - before);
    const taken = await store.claim('worker-a', 2, 60_000, 0);
    now = Date.now();
    expect(await store.oldestAgeMs(now)).toBeGreaterThanOrEqual(now - after);
    await store.ack(taken[0]!.entryId);
    now = Date.now();
    expect(await store.oldestAgeMs(now)).toBeGreaterThanOrEqual(now - after);
    // A retry due later waits for its time, not for a worker: it has no age yet.
    await store.reschedule(taken[1]!.entryId, { ...taken[1]!.job, attempt: 2 }, Date.now() + 60_000);
    expect(await store.oldestAgeMs(Date.now())).toBe(0);
    // One due a second ago and not moved back yet has waited that second.
    await store.enqueue([job(3)]);
    const [third] = await store.claim('worker-a', 1, 60_000, 0);
    const due = Date.now() - 1_000;
    await store.reschedule(third!.entryId, third!.job, due);
    now = Date.now();
    expect(await store.oldestAgeMs(now)).toBe(now - due);
    expect(await store.oldestAgeMs(due - 10)).toBe(0);
  });

  it('wakes a waiting consumer as soon as a job is queued', async () => {
    const store = makeStore();
    await store.claim('worker-a', 1, 60_000, 0); // the group exists
    const started = Date.now();
    const waiting = store.claim('worker-a', 1, 60_000, 3_000);
    await sleep(100);
    await store.enqueue([job(9)]);
    const got = await waiting;
    expect(got.map((q) => q.job)).toEqual([job(9, { createdAt: got[0]!.job.createdAt })]);
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it('schedules a retry in one step, and moves it back to the queue once due, once, however many replicas promote', async () => {
    const store = makeStore();
    await store.enqueue([job(1)]);
    const [taken] = await store.claim('worker-a', 1, 60_000, 0);
    const retry = { ...taken!.job, attempt: 2 };
    const due = Date.now() + 300;
    await store.reschedule(taken!.entryId, retry, due);
    expect(await store.depth()).toBe(1);
    expect(await store.claim('worker-a', 5, 0, 0)).toEqual([]);
    expect(await store.promoteDue(due - 1, 10)).toBe(0);
    const moved = await Promise.all([store.promoteDue(due, 10), store.promoteDue(due, 10), store.promoteDue(due + 5, 10)]);
    expect(moved.reduce((a, b) => a + b, 0)).toBe(1);
    expect(await store.depth()).toBe(1);
    const again = await store.claim('worker-b', 5, 60_000, 0);
    expect(again.map((q) => q.job)).toEqual([retry]);
    await store.ack(again[0]!.entryId);
    expect(await store.promoteDue(Date.now() + 60_000, 10)).toBe(0);
    expect(await store.depth()).toBe(0);
  });

  it('moves at most the number asked, earliest due first', async () => {
    const store = makeStore();
    await store.enqueue([job(1), job(2), job(3)]);
    const taken = await store.claim('worker-a', 3, 60_000, 0);
    const now = Date.now();
    await store.reschedule(taken[0]!.entryId, taken[0]!.job, now - 10);
    await store.reschedule(taken[1]!.entryId, taken[1]!.job, now - 30);
    await store.reschedule(taken[2]!.entryId, taken[2]!.job, now - 20);
    expect(await store.promoteDue(now, 2)).toBe(2);
    expect((await store.claim('worker-a', 5, 60_000, 0)).map((q) => q.job.messageId)).toEqual([job(2).messageId, job(3).messageId]);
    expect(await store.promoteDue(now, 2)).toBe(1);
  });
});

describe.each(implementations)("DeliveryStore contract, the follower's lease and position: %s", (_name, makeStore) => {
  it('lets one owner hold the lease at a time; another takes it once it lapses or is released', async () => {
    const store = makeStore();
    expect(await store.acquireLease('replica-a', 400)).toBe(true);
    expect(await store.acquireLease('replica-b', 400)).toBe(false);
    expect(await store.acquireLease('replica-a', 400)).toBe(true);
    await sleep(500);
    expect(await store.acquireLease('replica-b', 400)).toBe(true);
    await store.releaseLease('replica-a');
    expect(await store.acquireLease('replica-a', 400)).toBe(false);
    await store.releaseLease('replica-b');
    expect(await store.acquireLease('replica-a', 400)).toBe(true);
  });

  it("moves the position on only for the lease's holder, never backwards", async () => {
    const store = makeStore();
    expect(await store.position()).toBeUndefined();
    expect(await store.advancePosition('replica-a', '5-0')).toBe(false);
    await store.acquireLease('replica-a', 60_000);
    expect(await store.advancePosition('replica-a', '1700000000000-5')).toBe(true);
    expect(await store.advancePosition('replica-a', '999999999999-9')).toBe(true);
    expect(await store.position()).toBe('1700000000000-5');
    expect(await store.advancePosition('replica-a', '1700000000000-10')).toBe(true);
    expect(await store.position()).toBe('1700000000000-10');
    expect(await store.advancePosition('replica-b', '1800000000000-0')).toBe(false);
    expect(await store.position()).toBe('1700000000000-10');
  });
});

describe('RedisDeliveryStore', () => {
  it("keeps an agent's endpoints and attempts under its {agent id} tag, and the queue under {queue}, on a cluster", async () => {
    const store = track(new RedisDeliveryStore(clusterClient, 'dskeys'));
    const hook = webhook();
    await store.createWebhook(hook, 5);
    await store.recordAttempt(ALICE, hook.id, attempt(1), 'failed', 20);
    await store.enqueue([job(1), job(2)]);
    const [taken] = await store.claim('worker-a', 1, 60_000, 0);
    await store.reschedule(taken!.entryId, taken!.job, Date.now() + 60_000);
    await store.acquireLease('replica-a', 60_000);
    await store.advancePosition('replica-a', '5-0');
    expect((await keysMatching(clusterClient, 'dskeys:*')).sort()).toEqual([
      `dskeys:delivery:{${ALICE}}:webhook:${hook.id}:attempts`,
      `dskeys:delivery:{${ALICE}}:webhooks`,
      'dskeys:delivery:{follower}:lease',
      'dskeys:delivery:{follower}:position',
      'dskeys:delivery:{queue}:scheduled',
      'dskeys:delivery:{queue}:stream',
    ]);
  });

  it('waits for jobs on one connection, however many times it waits, without a warning', async () => {
    // A worker waits once every few seconds all day: each wait used to add a listener to the
    // waiting connection, until Node warned of a leak after the tenth.
    const warnings: string[] = [];
    const heard = (warning: Error): void => {
      warnings.push(`${warning.name}: ${warning.message}`);
    };
    process.on('warning', heard);
    try {
      for (const [name, client] of [
        ['redis', redis],
        ['redis cluster', clusterClient],
      ] as const) {
        const store = track(new RedisDeliveryStore(client, `dswait${(prefixes += 1)}`));
        await store.claim('worker-a', 1, 60_000, 0); // the group exists
        for (let i = 0; i < 15; i += 1) expect(await store.claim('worker-a', 1, undefined, 5), name).toEqual([]);
      }
      // Node emits its warnings on a later tick.
      await sleep(50);
    } finally {
      process.off('warning', heard);
    }
    expect(warnings).toEqual([]);
  });

  it('never stores a secret anywhere but its endpoint', async () => {
    const store = track(new RedisDeliveryStore(redis, 'dssecret'));
    const hook = webhook();
    await store.createWebhook(hook, 5);
    await store.recordAttempt(ALICE, hook.id, attempt(1), 'failed', 20);
    await store.enqueue([job(1, { webhookId: hook.id })]);
    const holders: string[] = [];
    // Lua's cjson writes `/` as `\/`: a secret with a slash in its base64 is found in either form.
    const forms = [hook.secret.slice(6), hook.secret.slice(6).replaceAll('/', '\\/')];
    for (const key of await keysMatching(redis, 'dssecret:*')) {
      const type = await redis.type(key);
      const values =
        type === 'hash'
          ? Object.values(await redis.hgetall(key))
          : type === 'list'
            ? await redis.lrange(key, 0, -1)
            : type === 'stream'
              ? (await redis.xrange(key, '-', '+')).flatMap(([, fields]) => fields)
              : [];
      if (values.some((value) => forms.some((form) => value.includes(form)))) holders.push(key);
    }
    expect(holders).toEqual([`dssecret:delivery:{${ALICE}}:webhooks`]);
  });
});
