import { afterAll, describe, expect, it } from 'vitest';
import { type LocalRedis, startRedisServer } from '../src/local/index.js';
import { redisUp } from '../src/metrics.js';
import { keysMatching, openRedis, type RedisClient } from '../src/store/index.js';
import { type LocalRedisCluster, startRedisCluster } from '@agentroom/testkit';

/** `agentroom_redis_up{service}` now, or undefined while the series does not exist. */
async function up(service: string): Promise<number | undefined> {
  return (await redisUp.get()).values.find((value) => value.labels.service === service)?.value;
}

async function until(service: string, value: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await up(service)) !== value) {
    if (Date.now() > deadline) throw new Error(`agentroom_redis_up{service="${service}"} is ${await up(service)}, not ${value}, after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The gauge that says whether each process reaches Redis: what the Redis dashboard and the Redis alert read. */
describe('agentroom_redis_up', () => {
  let server: LocalRedis | undefined;
  let cluster: LocalRedisCluster | undefined;
  const clients: RedisClient[] = [];

  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await server?.stop();
    await cluster?.stop();
  });

  it('is 1 while the connection is ready, 0 while the redis-server is stopped, and 1 again once it is back', async () => {
    server = await startRedisServer();
    const port = server.port;
    const client = await openRedis(server.url, 'up-test');
    clients.push(client);
    expect(await up('up-test')).toBe(1);

    await server.stop();
    await until('up-test', 0);

    server = await startRedisServer({ port });
    await until('up-test', 1);
    expect(await client.ping()).toBe('PONG');
  }, 30_000);

  it('is 0 once the connection is closed on purpose', async () => {
    const own = await startRedisServer();
    try {
      const client = await openRedis(own.url, 'up-quit-test');
      expect(await up('up-quit-test')).toBe(1);
      await client.quit();
      await until('up-quit-test', 0);
    } finally {
      await own.stop();
    }
  });

  it('follows a Redis Cluster client: 0 once it has lost every node, 1 once they are back', async () => {
    cluster = await startRedisCluster();
    const client = await openRedis(cluster.url, 'up-cluster-test');
    clients.push(client);
    expect(await up('up-cluster-test')).toBe(1);
    // A SCAN on each master: the client holds a connection to every node, as a busy service does.
    await keysMatching(client, 'nothing:*');

    const ports = cluster.servers().map((node) => node.port);
    for (const port of ports) await cluster.kill(port);
    await until('up-cluster-test', 0);

    for (const port of ports) await cluster.restart(port);
    await until('up-cluster-test', 1, 20_000);
  }, 60_000);
});
