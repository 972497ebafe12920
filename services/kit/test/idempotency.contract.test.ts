import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRedis, startRedisServer } from '../src/local/index.js';
import {
  type Cluster,
  connectRedis,
  connectRedisCluster,
  type FeedbackStore,
  IDEMPOTENCY_RUNNING_TTL_MS,
  IDEMPOTENCY_TTL_MS,
  type IdempotencyStore,
  MemoryFeedbackStore,
  MemoryIdempotencyStore,
  type Redis,
  RedisFeedbackStore,
  RedisIdempotencyStore,
} from '../src/store/index.js';
import { type LocalRedisCluster, startRedisCluster } from '@agentroom/testkit';

let redisServer: LocalRedis;
let redis: Redis;
/** One three-master Redis Cluster for the whole file: it takes about two seconds to start. */
let cluster: LocalRedisCluster;
let clusterClient: Cluster;
let prefixes = 0;

beforeAll(async () => {
  [redisServer, cluster] = await Promise.all([startRedisServer(), startRedisCluster()]);
  redis = connectRedis(redisServer.url, 'idem-test');
  clusterClient = connectRedisCluster(cluster.nodes, 'idem-test');
});

afterAll(async () => {
  await redis.quit();
  await redisServer.stop();
  await clusterClient.quit();
  await cluster.stop();
});

const answer = { id: 'p_1', text: 'kept as the operation answered it' };

const implementations: [string, () => IdempotencyStore][] = [
  ['memory', () => new MemoryIdempotencyStore()],
  ['redis', () => new RedisIdempotencyStore(redis, `id${(prefixes += 1)}`)],
  ['redis cluster', () => new RedisIdempotencyStore(clusterClient, `id${(prefixes += 1)}`)],
];

describe.each(implementations)('IdempotencyStore contract: %s', (_name, makeStore) => {
  it('lets exactly one of many concurrent first requests start', async () => {
    const store = makeStore();
    const results = await Promise.all(Array.from({ length: 100 }, () => store.begin('tok:a:k1', 'fp')));
    expect(results.filter((r) => r.outcome === 'started')).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'running')).toHaveLength(99);
  });

  it('tells a repeat since when the first call has been running', async () => {
    const store = makeStore();
    const before = Date.now();
    await store.begin('tok:a:since', 'fp');
    const repeat = await store.begin('tok:a:since', 'fp');
    expect(repeat.outcome).toBe('running');
    const since = repeat.outcome === 'running' ? (repeat.since ?? 0) : 0;
    expect(since).toBeGreaterThanOrEqual(before);
    expect(since).toBeLessThanOrEqual(Date.now());
  });

  it('replays a completed answer, and refuses the key with another body', async () => {
    const store = makeStore();
    await store.begin('tok:a:k2', 'fp');
    await store.complete('tok:a:k2', 'fp', answer);
    expect(await store.begin('tok:a:k2', 'fp')).toEqual({ outcome: 'replay', result: answer });
    expect(await store.begin('tok:a:k2', 'other')).toEqual({ outcome: 'mismatch' });
  });

  it('forgets an abandoned key so a retry can start again', async () => {
    const store = makeStore();
    await store.begin('tok:a:k3', 'fp');
    await store.abandon('tok:a:k3');
    expect(await store.begin('tok:a:k3', 'fp')).toEqual({ outcome: 'started' });
  });

  it('keeps keys apart', async () => {
    const store = makeStore();
    expect(await store.begin('tok:a:k4', 'fp')).toEqual({ outcome: 'started' });
    expect(await store.begin('tok:b:k4', 'fp')).toEqual({ outcome: 'started' });
  });
});

describe('expiry', () => {
  it('frees a running key whose request never finished (memory, by the clock)', async () => {
    let now = 1_000_000;
    const store = new MemoryIdempotencyStore({ now: () => now });
    await store.begin('k', 'fp');
    now += IDEMPOTENCY_RUNNING_TTL_MS + 1;
    expect(await store.begin('k', 'fp')).toEqual({ outcome: 'started' });
  });

  it("lets a claim's minute end without touching what the key holds since (memory)", async () => {
    let now = 1_000_000;
    const store = new MemoryIdempotencyStore({ now: () => now });
    await store.begin('finished', 'fp');
    await store.complete('finished', 'fp', answer);
    await store.begin('again', 'fp');
    await store.abandon('again');
    now += 30_000;
    await store.begin('again', 'fp');
    // The first claims' minute is over; the answer and the second claim are not.
    now += IDEMPOTENCY_RUNNING_TTL_MS - 30_000 + 1;
    expect(await store.begin('finished', 'fp')).toEqual({ outcome: 'replay', result: answer });
    expect(await store.begin('again', 'fp')).toEqual({ outcome: 'running', since: 1_030_000 });
    now += 30_000;
    expect(await store.begin('again', 'fp')).toEqual({ outcome: 'started' });
  });

  it('forgets expired keys as new ones come (memory), and keeps what is still remembered', async () => {
    let now = 1_000_000;
    const store = new MemoryIdempotencyStore({ now: () => now });
    for (let i = 0; i < 1_000; i += 1) {
      await store.begin(`done-${i}`, 'fp');
      await store.complete(`done-${i}`, 'fp', answer);
    }
    await store.begin('crashed', 'fp');
    await store.begin('abandoned', 'fp');
    await store.abandon('abandoned');
    expect(store.size).toBe(1_001);

    // A day later (plus a minute): every answer and the crashed claim have expired.
    now += IDEMPOTENCY_TTL_MS + IDEMPOTENCY_RUNNING_TTL_MS;
    await store.begin('late-1', 'fp');
    await store.complete('late-1', 'fp', answer);
    expect(store.size).toBe(1);
    // A key claimed again after it was abandoned keeps its new record when the old one's time comes.
    await store.begin('abandoned', 'fp');
    now += IDEMPOTENCY_RUNNING_TTL_MS - 1;
    await store.begin('late-2', 'fp');
    expect(await store.begin('late-1', 'fp')).toEqual({ outcome: 'replay', result: answer });
    expect(await store.begin('abandoned', 'other')).toEqual({ outcome: 'mismatch' });
  });

  it('keeps at most its number of answers in memory, forgetting the oldest first, before their day is up', async () => {
    let now = 1_000_000;
    const store = new MemoryIdempotencyStore({ now: () => now }, { maxKeys: 100 });
    for (let i = 0; i < 150; i += 1) {
      await store.begin(`done-${i}`, 'fp');
      await store.complete(`done-${i}`, 'fp', { ...answer, i });
      now += 1;
    }
    // A claim running past the bound is never dropped for it: only answers are.
    const claimedAt = now;
    await store.begin('running', 'fp');
    expect(store.size).toBeLessThanOrEqual(101);
    // A repeat learns since when the first call runs (an edge may take over a dead one's claim).
    expect(await store.begin('running', 'fp')).toEqual({ outcome: 'running', since: claimedAt });
    expect(await store.begin('done-149', 'fp')).toEqual({ outcome: 'replay', result: { ...answer, i: 149 } });
    expect(await store.begin('done-60', 'fp')).toEqual({ outcome: 'replay', result: { ...answer, i: 60 } });
    // The oldest went: the same key starts again.
    expect(await store.begin('done-0', 'fp')).toEqual({ outcome: 'started' });
    expect(store.size).toBeLessThanOrEqual(101);
  });

  it('replays the answer as it was completed, a new object each time (memory)', async () => {
    const store = new MemoryIdempotencyStore();
    const completed = { id: 'p_2', text: 'as answered', mentions: [{ agentId: 'a_1', agentName: 'ada' }] };
    await store.begin('k', 'fp');
    await store.complete('k', 'fp', completed);
    completed.text = 'changed by its caller afterwards';
    const first = await store.begin('k', 'fp');
    const second = await store.begin('k', 'fp');
    expect(first).toEqual({ outcome: 'replay', result: { id: 'p_2', text: 'as answered', mentions: [{ agentId: 'a_1', agentName: 'ada' }] } });
    expect(second).toEqual(first);
    expect(first.outcome === 'replay' && second.outcome === 'replay' && first.result !== second.result).toBe(true);
  });

  it('keeps a completed answer 24 hours in Redis', async () => {
    const store = new RedisIdempotencyStore(redis, 'idttl');
    await store.begin('k', 'fp');
    await store.complete('k', 'fp', answer);
    const [key] = await redis.keys('idttl:idem:*');
    const ttl = await redis.pttl(key as string);
    expect(ttl).toBeGreaterThan(24 * 3600 * 1000 - 60_000);
    expect(ttl).toBeLessThanOrEqual(24 * 3600 * 1000);
  });
});

describe.each([
  ['memory', () => new MemoryFeedbackStore(3)],
  ['redis', () => new RedisFeedbackStore(redis, `fb${(prefixes += 1)}`, 3)],
  ['redis cluster', () => new RedisFeedbackStore(clusterClient, `fb${(prefixes += 1)}`, 3)],
] as [string, () => FeedbackStore][])('FeedbackStore contract: %s', (_name, makeStore) => {
  it('keeps reports newest first, bounded to the newest few', async () => {
    const store = makeStore();
    for (let i = 1; i <= 5; i += 1) await store.add({ problem: `report ${i}`, agent: 'scout' });
    const recent = await store.recent(10);
    expect(recent.map((r) => r.problem)).toEqual(['report 5', 'report 4', 'report 3']);
    expect(recent[0]).toMatchObject({ agent: 'scout', id: expect.stringMatching(/^fb_/) as unknown as string });
  });
});
