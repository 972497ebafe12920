import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storageEnv } from '../src/config.js';
import { type LocalRedis, startRedisServer } from '../src/local/index.js';
import { unreplicatedWrites } from '../src/metrics.js';
import { isStorageUnavailable, LuaScript, openRedis, Redis, type RedisClient } from '../src/store/index.js';
import { type LocalRedisCluster, startRedisCluster } from '@agentroom/testkit';

const POSTS_KEY = 'ar:room:{main}:posts';
const append = new LuaScript("return redis.call('XADD', KEYS[1], '*', 'text', ARGV[1])");

/** The counter's value for `service` now (the registry is shared by every test of a worker: compare differences). */
async function unreplicated(service: string): Promise<number> {
  return (await unreplicatedWrites.get()).values.find((value) => value.labels.service === service)?.value ?? 0;
}

/** A direct connection to one node, for what only that node can say. */
function node(port: number): Redis {
  const connection = new Redis(port, '127.0.0.1', { protocol: 2, maxRetriesPerRequest: 0 });
  connection.on('error', () => undefined);
  return connection;
}

describe('startRedisCluster with a replica per master', () => {
  let cluster: LocalRedisCluster;
  let client: RedisClient;

  beforeAll(async () => {
    cluster = await startRedisCluster({ replicas: 1, nodeTimeoutMs: 2_000 });
    client = await openRedis(cluster.url, 'replicas-test', undefined, { replicaWait: { timeoutMs: 1_000 } });
  }, 30_000);

  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });

  it('starts three masters and three replicas and says which master holds a key', async () => {
    expect(cluster.servers()).toHaveLength(6);
    expect(cluster.nodes).toHaveLength(3);
    expect(await cluster.slotOf(POSTS_KEY)).toBe(12501);
    const master = await cluster.masterOf(POSTS_KEY);
    expect(cluster.nodes.map((n) => n.port)).toContain(master.port);
    expect(master.pid).toBeGreaterThan(0);
  });

  it("acknowledges a write once the master's replica has it", async () => {
    const before = await unreplicated('replicas-test');
    const id = (await append.runAcknowledged(client, [POSTS_KEY], ['kept twice'])) as string;
    const master = node((await cluster.masterOf(POSTS_KEY)).port);
    const replicaPort = Number(/slave0:ip=[^,]+,port=(\d+)/.exec(await master.info('replication'))?.[1]);
    master.disconnect();
    // Read on the replica itself, right after the answer: WAIT answered once it had applied the write.
    const replica = node(replicaPort);
    await replica.call('READONLY');
    const [entry] = (await replica.xrange(POSTS_KEY, id, id)) as [string, string[]][];
    replica.disconnect();
    expect(entry?.[0]).toBe(id);
    expect(await unreplicated('replicas-test')).toBe(before);
  });

  it('kills the master of a key: its replica takes over, the client follows, and the killed node rejoins as a replica', async () => {
    const first = await cluster.masterOf(POSTS_KEY);
    const id = (await append.runAcknowledged(client, [POSTS_KEY], ['before the kill'])) as string;
    await cluster.kill(first.port);
    expect(cluster.servers().find((n) => n.port === first.port)?.pid).toBeUndefined();

    let after = first;
    for (let tries = 0; after.port === first.port && tries < 150; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      after = await cluster.masterOf(POSTS_KEY);
    }
    expect(after.port).not.toBe(first.port);
    // Each failed attempt is a 503-kind error, never a hang; then writes go to the new master.
    let written: string | undefined;
    for (let tries = 0; written === undefined && tries < 50; tries += 1) {
      try {
        written = (await append.runAcknowledged(client, [POSTS_KEY], ['after the failover'])) as string;
      } catch (error) {
        expect(isStorageUnavailable(error)).toBe(true);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    expect(written).toBeDefined();
    expect(((await client.xrange(POSTS_KEY, id, id)) as [string, string[]][])[0]?.[0]).toBe(id);

    await cluster.restart(first.port);
    const rejoined = node(first.port);
    let replication = '';
    for (let tries = 0; !/master_link_status:up/.test(replication) && tries < 100; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      replication = await rejoined.info('replication');
    }
    rejoined.disconnect();
    expect(replication).toMatch(/role:slave/);
    expect(replication).toMatch(new RegExp(`master_port:${after.port}`));
    expect(replication).toMatch(/master_link_status:up/);
  }, 30_000);
});

describe('waiting for replicas on a Redis without any', () => {
  let server: LocalRedis;

  beforeAll(async () => {
    server = await startRedisServer();
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('does not wait by default, since the server has no replica', async () => {
    const client = await openRedis(server.url, 'no-replicas-auto', undefined, { replicaWait: { timeoutMs: 1_000 } });
    const before = await unreplicated('no-replicas-auto');
    expect(await append.runAcknowledged(client, ['ar:test:{auto}:stream'], ['one'])).toMatch(/^\d+-\d+$/);
    expect(await unreplicated('no-replicas-auto')).toBe(before);
    client.disconnect();
  });

  it('answers a write that no replica acknowledged in time, counts it, and stops waiting for a while', async () => {
    const client = await openRedis(server.url, 'no-replicas-asked', undefined, { replicaWait: { replicas: 1, timeoutMs: 20 } });
    const before = await unreplicated('no-replicas-asked');
    const first = (await append.runAcknowledged(client, ['ar:test:{asked}:stream'], ['one'])) as string;
    const second = (await append.runAcknowledged(client, ['ar:test:{asked}:stream'], ['two'])) as string;
    expect(await client.xlen('ar:test:{asked}:stream')).toBe(2);
    expect(second > first).toBe(true);
    // Both answered without a replica: the first after waiting out the timeout, the second without waiting.
    expect(await unreplicated('no-replicas-asked')).toBe(before + 2);
    client.disconnect();
  });
});

describe('Redis Cluster errors and settings', () => {
  it('reads failover errors as storage unavailable (503), and a script error not', () => {
    for (const message of [
      'CLUSTERDOWN The cluster is down',
      'TRYAGAIN Multiple keys request during rehashing of slot',
      'LOADING Redis is loading the dataset in memory',
      'Too many Cluster redirections. Last error: ReplyError: MOVED 12501 127.0.0.1:7001',
      "Cluster isn't ready and enableOfflineQueue options is false",
      'Failed to refresh slots cache.',
      'Command aborted due to connection close',
    ])
      expect(isStorageUnavailable(new Error(message)), message).toBe(true);
    expect(isStorageUnavailable(new Error('ERR Error running script'))).toBe(false);
  });

  it('takes REDIS_WAIT_REPLICAS and REDIS_WAIT_TIMEOUT_MS, unset by default (decided by the Redis), 250 ms', () => {
    expect(storageEnv.parse({})).toMatchObject({ REDIS_WAIT_TIMEOUT_MS: 250 });
    expect(storageEnv.parse({}).REDIS_WAIT_REPLICAS).toBeUndefined();
    expect(storageEnv.parse({ REDIS_WAIT_REPLICAS: '0', REDIS_WAIT_TIMEOUT_MS: '100' })).toMatchObject({ REDIS_WAIT_REPLICAS: 0, REDIS_WAIT_TIMEOUT_MS: 100 });
    expect(storageEnv.safeParse({ REDIS_WAIT_REPLICAS: 'two' }).success).toBe(false);
    expect(storageEnv.safeParse({ REDIS_WAIT_TIMEOUT_MS: '0' }).success).toBe(false);
  });
});
