import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalRedis, startRedisServer } from '@agentroom/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// `npm run chaos` in small: the same cluster child, load and checks (bench/src/faults.ts).
import { health, listedPostIds, Load, type RunningCluster, sleep, startCluster, until } from '../../bench/src/faults.js';
import { approvedToken } from '../../bench/src/human.js';

const DEADLINE_MS = 5_000;

/**
 * Faults in cluster mode (`node launcher/dist/cluster.js`, built by `npm test`) on a Redis with an
 * append-only file: a service process killed with SIGKILL is restarted by the launcher and no
 * acknowledged post is lost; Redis stopped and started again is noticed and recovered from
 * without restarting any service.
 */
describe('faults in cluster mode', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentroom-chaos-test-'));
  let redis: LocalRedis;
  let cluster: RunningCluster;
  let token: string;

  beforeAll(async () => {
    redis = await startRedisServer({ dir, appendfsync: 'everysec' });
    cluster = await startCluster({ REDIS_URL: redis.url, EDGE_REPLICAS: '1' });
    token = await approvedToken(cluster.origin, ['posts:write'], 'chaos-smoke');
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const post = (text: string): Promise<Response> =>
    fetch(`${cluster.origin}/api/v1/posts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
      body: JSON.stringify({ text }),
      signal: AbortSignal.timeout(DEADLINE_MS),
    });

  it('restarts the room after kill -9 under load: no acknowledged post lost, no request past its deadline', async () => {
    const load = new Load(cluster.origin, [token], { readers: 1, writers: 1, deadlineMs: DEADLINE_MS, pauseMs: 20 });
    load.start();
    await sleep(1_000);
    const from = Date.now();
    const before = cluster.restarts('room');
    const pid = cluster.pid('room');
    process.kill(pid, 'SIGKILL');
    const newPid = await cluster.restarted('room', before, 15_000);
    const recovered = await load.settled(1_500, 20_000);
    await load.stop();

    expect(newPid).not.toBe(pid);
    expect(cluster.lines.join('\n')).toMatch(/room exited \(SIGKILL\) after [\d.]+ s; restarting it in 0\.5 s \(restart 1\)/);
    expect(recovered).toBe(true);
    const window = load.stats(from);
    expect(window.timeouts).toBe(0);
    expect(window.maxMs).toBeLessThan(DEADLINE_MS);
    // Failures are answers, never hangs: 503 with Retry-After, nothing else.
    expect(Object.keys(window.byOutcome).filter((kind) => kind !== '503')).toEqual([]);
    expect(window.withoutRetryAfter).toBe(0);
    expect(load.acknowledged.size).toBeGreaterThan(0);
    const listed = await listedPostIds(cluster.origin);
    expect([...load.acknowledged.keys()].filter((id) => !listed.has(id))).toEqual([]);
  }, 40_000);

  it('backs off: a process that crashes again soon after its restart waits twice as long', async () => {
    const before = cluster.restarts('room');
    process.kill(cluster.pid('room'), 'SIGKILL');
    await cluster.restarted('room', before, 15_000);
    expect(cluster.lines.join('\n')).toMatch(/room exited \(SIGKILL\) after [\d.]+ s; restarting it in 1\.0 s \(restart 2\)/);
    // Health's own gRPC channel may reconnect before the one posts use: wait for a post itself.
    await until('a post is accepted again', async () => (await post('after the second restart')).status === 201, 15_000);
  }, 30_000);

  it('degrades health and fails writes fast while Redis is down, and recovers by itself when it returns', async () => {
    const kept = await post('written before Redis stopped');
    expect(kept.status).toBe(201);
    const keptId = ((await kept.json()) as { id: string }).id;
    const restartsBefore = ['room', 'messaging', 'auth', 'edge-1'].map((name) => cluster.restarts(name));
    const port = redis.port;
    await redis.stop(); // the folder is ours: it stays

    const down = await health(cluster.origin);
    expect(down.status).toBe(503);
    // Health says what is wrong in its own answer, although the quota could not be counted.
    expect(down.body).toMatchObject({ status: 'degraded', checks: { storage: 'down' } });
    const started = Date.now();
    const refused = await post('written while Redis is down');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(Date.now() - started).toBeLessThan(2_000);

    redis = await startRedisServer({ port, dir, appendfsync: 'everysec' });
    await until('health answers 200 again', async () => (await health(cluster.origin)).status === 200, 15_000);
    // Each service reconnects on its own within a quarter of a second; a post may race the last one.
    let afterId = '';
    await until(
      'a post is accepted again',
      async () => {
        const after = await post('written after Redis returned');
        if (after.status === 201) afterId = ((await after.json()) as { id: string }).id;
        return after.status === 201;
      },
      5_000,
    );
    const listed = await listedPostIds(cluster.origin);
    expect(listed.has(keptId)).toBe(true);
    expect(listed.has(afterId)).toBe(true);
    // Nothing was restarted: the services reconnected on their own.
    expect(['room', 'messaging', 'auth', 'edge-1'].map((name) => cluster.restarts(name))).toEqual(restartsBefore);
  }, 30_000);
});
