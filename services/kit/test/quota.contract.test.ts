import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRedis, startRedisServer } from '../src/local/index.js';
import {
  type Cluster,
  connectRedis,
  connectRedisCluster,
  keysMatching,
  MemoryQuotaStore,
  nextUtcMidnight,
  type QuotaStore,
  type Redis,
  RedisQuotaStore,
} from '../src/store/index.js';
import { type LocalRedisCluster, startRedisCluster } from '@agentroom/testkit';

/** A clock the test moves by hand. */
function manualClock(start: number): { now(): number; set(t: number): void } {
  let t = start;
  return { now: () => t, set: (next) => (t = next) };
}

const DAY_MS = 86_400_000;
/**
 * Noon of the real current UTC day: Redis expires counters at an absolute time (PEXPIREAT), so
 * the store's clock must not lie in the past of the Redis server's, or every key would vanish at once.
 */
const NOON = Math.floor(Date.now() / DAY_MS) * DAY_MS + DAY_MS / 2;

interface Harness {
  store(clock?: { now(): number }): QuotaStore;
  /** Milliseconds until the counter key of `subject` expires, where the store can say. */
  ttlOf?(subject: string): Promise<number>;
}

let redisServer: LocalRedis;
let redis: Redis;
/** One three-master Redis Cluster for the whole file: it takes about two seconds to start. */
let cluster: LocalRedisCluster;
let clusterClient: Cluster;
let prefixes = 0;

beforeAll(async () => {
  [redisServer, cluster] = await Promise.all([startRedisServer(), startRedisCluster()]);
  redis = connectRedis(redisServer.url, 'quota-test');
  clusterClient = connectRedisCluster(cluster.nodes, 'quota-test');
});

afterAll(async () => {
  await redis.quit();
  await redisServer.stop();
  await clusterClient.quit();
  await cluster.stop();
});

const implementations: [string, () => Harness][] = [
  ['memory', () => ({ store: (clock) => new MemoryQuotaStore(clock) })],
  [
    'redis',
    () => {
      const prefix = `qt${(prefixes += 1)}`;
      return {
        store: (clock) => new RedisQuotaStore(redis, prefix, clock),
        ttlOf: async (subject) => {
          const [key] = await redis.keys(`${prefix}:quota:{${subject}}:*`);
          return redis.pttl(key as string);
        },
      };
    },
  ],
  [
    'redis cluster',
    () => {
      const prefix = `qt${(prefixes += 1)}`;
      return {
        store: (clock) => new RedisQuotaStore(clusterClient, prefix, clock),
        ttlOf: async (subject) => {
          // KEYS reaches one node of a cluster: SCAN every master instead.
          const [key] = await keysMatching(clusterClient, `${prefix}:quota:{${subject}}:*`);
          return clusterClient.pttl(key as string);
        },
      };
    },
  ],
];

describe.each(implementations)('QuotaStore contract: %s', (_name, harness) => {
  it('counts calls per subject and says what is left', async () => {
    const store = harness().store(manualClock(NOON));
    const first = await store.consume('addr:1', 3);
    expect(first).toMatchObject({ limit: 3, remaining: 2, allowed: true });
    await store.consume('addr:1', 3);
    const third = await store.consume('addr:1', 3);
    expect(third).toMatchObject({ remaining: 0, allowed: true });
    const other = await store.consume('addr:2', 3);
    expect(other.remaining).toBe(2);
  });

  it('refuses past the limit and never reports a negative remainder', async () => {
    const store = harness().store(manualClock(NOON));
    for (let i = 0; i < 2; i += 1) await store.consume('tok:a', 2);
    const over = await store.consume('tok:a', 2);
    const further = await store.consume('tok:a', 2);
    expect(over).toMatchObject({ allowed: false, remaining: 0 });
    expect(further).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('is exact under concurrency: of 200 simultaneous calls, exactly the limit pass', async () => {
    const store = harness().store(manualClock(NOON));
    const results = await Promise.all(Array.from({ length: 200 }, () => store.consume('addr:busy', 50)));
    expect(results.filter((r) => r.allowed)).toHaveLength(50);
    expect(Math.min(...results.map((r) => r.remaining))).toBe(0);
  });

  it('resets at the next UTC midnight and says how long until then', async () => {
    const clock = manualClock(NOON);
    const h = harness();
    const store = h.store(clock);
    const state = await store.consume('addr:day', 1);
    expect(state.resetSeconds).toBe(12 * 3600);
    expect((await store.consume('addr:day', 1)).allowed).toBe(false);
    if (h.ttlOf) {
      const ttl = await h.ttlOf('addr:day');
      // The key expires at midnight by the store's clock: PEXPIREAT takes an absolute time.
      expect(Math.abs(ttl - (nextUtcMidnight(NOON) - Date.now()))).toBeLessThan(5_000);
    }
    clock.set(nextUtcMidnight(NOON) + 1);
    expect(await store.consume('addr:day', 1)).toMatchObject({ allowed: true, remaining: 0 });
  });
});

describe('Redis connection', () => {
  it('speaks RESP2, as the stream code expects', async () => {
    const info = (await redis.client('INFO')) as string;
    expect(info).toMatch(/\bresp=2\b/);
  });

  it('keeps quota keys under a hash tag so one subject stays in one cluster slot', async () => {
    await new RedisQuotaStore(redis, 'tagcheck').consume('addr:9.9.9.9', 10);
    const keys = await redis.keys('tagcheck:*');
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^tagcheck:quota:\{addr:9\.9\.9\.9\}:\d{8}$/);
  });
});

describe('Lua scripts by digest', () => {
  it('counts by EVALSHA, and loads the script again on a server that forgot it (restart, SCRIPT FLUSH)', async () => {
    const store = new RedisQuotaStore(redis, 'scriptcheck');
    const before = await redis.info('commandstats');
    const calls = (stats: string, command: string): number => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
    expect((await store.consume('addr:1.1.1.1', 10)).remaining).toBe(9);
    expect((await store.consume('addr:1.1.1.1', 10)).remaining).toBe(8);
    await redis.script('FLUSH');
    expect((await store.consume('addr:1.1.1.1', 10)).remaining).toBe(7);
    expect((await store.consume('addr:1.1.1.1', 10)).remaining).toBe(6);
    const after = await redis.info('commandstats');
    // Four counts: each an EVALSHA, and the source sent again only where the server lacked it.
    expect(calls(after, 'evalsha') - calls(before, 'evalsha')).toBe(4);
    expect(calls(after, 'eval') - calls(before, 'eval')).toBeLessThanOrEqual(2);
    expect(calls(after, 'eval') - calls(before, 'eval')).toBeGreaterThanOrEqual(1);
  });

  it('runs on every node of a cluster, each loading it once', async () => {
    const store = new RedisQuotaStore(clusterClient, 'scriptcheck');
    const subjects = Array.from({ length: 12 }, (_, i) => `addr:10.0.0.${i}`);
    for (const subject of subjects) expect((await store.consume(subject, 5)).remaining).toBe(4);
    for (const subject of subjects) expect((await store.consume(subject, 5)).remaining).toBe(3);
  });
});
