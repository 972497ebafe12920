import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRedis, startRedisServer } from '../src/local/index.js';
import {
  type Cluster,
  connectRedis,
  connectRedisCluster,
  keyBesideQuota,
  keysMatching,
  type Redis,
  type RedisClient,
  RedisIdempotencyStore,
  RedisQuotaStore,
} from '../src/store/index.js';
import { type LocalRedisCluster, startRedisCluster } from '@agentroom/testkit';

// A write's quota count and idempotency claim in one script (RedisIdempotencyStore.consumeAndBegin),
// on one redis-server and on a three-master Redis Cluster, where both keys must share a slot.

let redisServer: LocalRedis;
let redis: Redis;
let cluster: LocalRedisCluster;
let clusterClient: Cluster;
let prefixes = 0;

beforeAll(async () => {
  [redisServer, cluster] = await Promise.all([startRedisServer(), startRedisCluster()]);
  redis = connectRedis(redisServer.url, 'claim-test');
  clusterClient = connectRedisCluster(cluster.nodes, 'claim-test');
});

afterAll(async () => {
  await redis.quit();
  await redisServer.stop();
  await clusterClient.quit();
  await cluster.stop();
});

const answer = { id: '1795433575620-0', text: 'kept as the operation answered it' };

function storesOn(client: RedisClient): { prefix: string; quota: RedisQuotaStore; idempotency: RedisIdempotencyStore } {
  const prefix = `qc${(prefixes += 1)}`;
  return { prefix, quota: new RedisQuotaStore(client, prefix), idempotency: new RedisIdempotencyStore(client, prefix) };
}

describe.each([
  ['redis', (): RedisClient => redis],
  ['redis cluster', (): RedisClient => clusterClient],
] as const)('count and claim in one step: %s', (_name, client) => {
  it('counts the call and claims its key; a repeat replays, another input is refused, a claim still running says so', async () => {
    const { quota, idempotency } = storesOn(client());
    const key = keyBesideQuota('tok:a', 'op:createPost:k1');
    const first = await idempotency.consumeAndBegin(quota, 'tok:a', 10, key, 'fp');
    expect(first).toMatchObject({ quota: { limit: 10, remaining: 9, allowed: true }, begun: { outcome: 'started' } });
    expect(await idempotency.consumeAndBegin(quota, 'tok:a', 10, key, 'fp')).toMatchObject({ quota: { remaining: 8 }, begun: { outcome: 'running' } });
    await idempotency.complete(key, 'fp', answer);
    expect(await idempotency.consumeAndBegin(quota, 'tok:a', 10, key, 'fp')).toMatchObject({
      quota: { remaining: 7 },
      begun: { outcome: 'replay', result: answer },
    });
    expect(await idempotency.consumeAndBegin(quota, 'tok:a', 10, key, 'other')).toMatchObject({ quota: { remaining: 6 }, begun: { outcome: 'mismatch' } });
    // The same key space as `begin`: a call that takes the two-step path meets the same record.
    expect(await idempotency.begin(key, 'fp')).toEqual({ outcome: 'replay', result: answer });
    expect(await quota.consume('tok:a', 10)).toMatchObject({ remaining: 5 });
  });

  it('claims nothing for a call over its quota, so the key stays free', async () => {
    const { quota, idempotency } = storesOn(client());
    const key = keyBesideQuota('tok:b', 'op:createPost:k2');
    await quota.consume('tok:b', 1);
    const over = await idempotency.consumeAndBegin(quota, 'tok:b', 1, key, 'fp');
    expect(over.quota).toMatchObject({ allowed: false, remaining: 0 });
    expect(over.begun).toBeUndefined();
    expect(await idempotency.begin(key, 'fp')).toEqual({ outcome: 'started' });
  });

  it('frees an abandoned key for the retry', async () => {
    const { quota, idempotency } = storesOn(client());
    const key = keyBesideQuota('addr:10.1.1.1', 'op:createPost:k3');
    expect((await idempotency.consumeAndBegin(quota, 'addr:10.1.1.1', 10, key, 'fp')).begun).toEqual({ outcome: 'started' });
    await idempotency.abandon(key);
    expect((await idempotency.consumeAndBegin(quota, 'addr:10.1.1.1', 10, key, 'fp')).begun).toEqual({ outcome: 'started' });
  });

  it('lets exactly one of many concurrent first calls start, and counts every one', async () => {
    const { quota, idempotency } = storesOn(client());
    const key = keyBesideQuota('tok:c', 'op:createPost:k4');
    const results = await Promise.all(Array.from({ length: 50 }, () => idempotency.consumeAndBegin(quota, 'tok:c', 1_000, key, 'fp')));
    expect(results.filter((r) => r.begun?.outcome === 'started')).toHaveLength(1);
    expect(results.filter((r) => r.begun?.outcome === 'running')).toHaveLength(49);
    expect(Math.min(...results.map((r) => r.quota.remaining))).toBe(950);
  });

  it('is exact at the limit under concurrency: only calls within it claim', async () => {
    const { quota, idempotency } = storesOn(client());
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => idempotency.consumeAndBegin(quota, 'tok:d', 20, keyBesideQuota('tok:d', `op:createPost:k-${i}`), 'fp')),
    );
    expect(results.filter((r) => r.quota.allowed)).toHaveLength(20);
    expect(results.filter((r) => r.begun?.outcome === 'started')).toHaveLength(20);
    expect(results.every((r) => r.quota.allowed === (r.begun !== undefined))).toBe(true);
  });

  it("keeps the record beside the subject's quota counter, under the subject's hash tag", async () => {
    const { prefix, quota, idempotency } = storesOn(client());
    await idempotency.consumeAndBegin(quota, 'tok:e', 10, keyBesideQuota('tok:e', 'op:createPost:k5'), 'fp');
    const keys = (await keysMatching(client(), `${prefix}:*`)).sort();
    expect(keys).toHaveLength(2);
    expect(keys[0]).toBe(`${prefix}:idem:{tok:e}:op:createPost:k5`);
    expect(keys[1]).toMatch(new RegExp(`^${prefix}:quota:\\{tok:e\\}:\\d{8}$`));
  });
});

/** The commands clients send to Redis while `work` runs, by name (MONITOR; what a script runs inside is left out). */
async function commandsSentDuring(client: Redis, work: () => Promise<unknown>): Promise<string[]> {
  const monitor = await client.monitor();
  const sent: string[] = [];
  const marker = `end-of-work-${process.pid}-${Date.now()}`;
  const ended = new Promise<void>((resolve) => {
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      const command = (args[0] ?? '').toLowerCase();
      if (command === 'echo' && args[1] === marker) resolve();
      else if (source !== 'lua') sent.push(command);
    });
  });
  try {
    await work();
    await client.echo(marker);
    await ended;
  } finally {
    monitor.disconnect();
  }
  return sent;
}

describe('one round trip', () => {
  it('sends one script for the count and the claim, where the two-step path sends a count and a SET NX', async () => {
    const { quota, idempotency } = storesOn(redis);
    // Once first, so the server holds both scripts and only the steady state is watched.
    await idempotency.consumeAndBegin(quota, 'tok:f', 10, keyBesideQuota('tok:f', 'op:createPost:warm'), 'fp');
    await quota.consume('tok:f', 10);
    const together = await commandsSentDuring(redis, () => idempotency.consumeAndBegin(quota, 'tok:f', 10, keyBesideQuota('tok:f', 'op:createPost:k6'), 'fp'));
    expect(together).toEqual(['evalsha']);
    const apart = await commandsSentDuring(redis, async () => {
      await quota.consume('tok:f', 10);
      await idempotency.begin(keyBesideQuota('tok:f', 'op:createPost:k7'), 'fp');
    });
    expect(apart).toEqual(['evalsha', 'set']);
  });
});
