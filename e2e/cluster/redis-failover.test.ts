import { openRedis } from '@agentroom/kit/store';
import { type LocalRedisCluster, startRedisCluster, Load, type RunningCluster, sleep, startCluster, until, approvedToken } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// `npm run chaos -- --redis-cluster` in small: the same cluster child and load (@agentroom/testkit).

const DEADLINE_MS = 5_000;
const POSTS_KEY = 'ar:room:{main}:posts';

/**
 * The cluster (`node launcher/dist/cluster.js`, built by `npm test`) on a Redis Cluster of three
 * masters and three replicas: the master holding the room's posts killed with SIGKILL under a small
 * load. Its replica takes over, the services follow it without a restart, failures meanwhile are
 * 503s with Retry-After, and every post answered 201 is in Redis afterwards, since the room
 * acknowledges a post once a replica has it (docs/decisions.md §20).
 */
describe("a Redis Cluster master's death", () => {
  let redis: LocalRedisCluster;
  let cluster: RunningCluster;
  let token: string;

  beforeAll(async () => {
    redis = await startRedisCluster({ replicas: 1, nodeTimeoutMs: 2_000 });
    cluster = await startCluster({ REDIS_URL: redis.url });
    token = await approvedToken(cluster.origin, ['posts:write'], 'failover-smoke');
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
    await redis?.stop();
  });

  const post = (text: string): Promise<Response> =>
    fetch(`${cluster.origin}/api/v1/posts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
      body: JSON.stringify({ text }),
      signal: AbortSignal.timeout(DEADLINE_MS),
    });

  it('fails over under load: only 503s meanwhile, no acknowledged post lost, and posts are taken again', async () => {
    expect(cluster.lines.some((line) => line.includes('"service":"room"') && line.includes('acknowledged once 1 replica has it'))).toBe(true);
    const load = new Load(cluster.origin, [token], { readers: 1, writers: 2, deadlineMs: DEADLINE_MS, pauseMs: 20 });
    load.start();
    await sleep(1_000);
    const master = await redis.masterOf(POSTS_KEY);
    const from = Date.now();
    await redis.kill(master.port);
    await until('a replica took over the posts', async () => (await redis.masterOf(POSTS_KEY)).port !== master.port, 20_000);
    const recovered = await load.settled(1_500, 20_000);
    await load.stop();

    expect(recovered).toBe(true);
    const window = load.stats(from);
    expect(window.timeouts).toBe(0);
    // Failures are answers, never hangs nor 500s: 503 with Retry-After.
    expect(Object.keys(window.byOutcome).filter((kind) => !kind.endsWith(' 503'))).toEqual([]);
    expect(window.withoutRetryAfter).toBe(0);

    const after = await post('after the failover');
    expect(after.status).toBe(201);
    const { id } = (await after.json()) as { id: string };
    expect(load.acknowledged.size).toBeGreaterThan(0);

    // What the cluster holds, read from it directly: edges' memory of the first page is no witness.
    const client = await openRedis(redis.url, 'failover-test');
    try {
      const stored = new Set(((await client.xrange(POSTS_KEY, '-', '+')) as [string, string[]][]).map(([storedId]) => storedId));
      expect([...load.acknowledged.keys()].filter((acknowledged) => !stored.has(acknowledged))).toEqual([]);
      expect(stored.has(id)).toBe(true);
    } finally {
      client.disconnect();
    }
  }, 45_000);
});
