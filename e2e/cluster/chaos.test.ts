import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// `npm run chaos` in small: the same cluster child, load and checks (@agentroom/testkit).
import { health, listedPostIds, LiveFeed, Load, type RunningCluster, sleep, startCluster, until, approvedToken } from '@agentroom/testkit';

const DEADLINE_MS = 5_000;

/**
 * Faults in cluster mode (`node launcher/dist/cluster.js`, built by `npm test`) on a Redis with an
 * append-only file, with two room processes: one killed with SIGKILL costs no read (edge sends a
 * call the dead room did not answer to the other), no acknowledged post and no cut in the live feed,
 * and the launcher restarts it; Redis stopped and started again is noticed and recovered from
 * without restarting any service.
 */
describe('faults in cluster mode', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentroom-chaos-test-'));
  let redis: LocalRedis;
  let cluster: RunningCluster;
  let token: string;

  beforeAll(async () => {
    redis = await startRedisServer({ dir, appendfsync: 'everysec' });
    cluster = await startCluster({ REDIS_URL: redis.url, EDGE_REPLICAS: '1', ROOM_REPLICAS: '2' });
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

  it('kill -9 of one room of two under load: no read fails, no acknowledged post lost, the live feed goes on; the launcher restarts it', async () => {
    const load = new Load(cluster.origin, [token], { readers: 1, writers: 1, deadlineMs: DEADLINE_MS, pauseMs: 20 });
    const feed = new LiveFeed(`${cluster.origin}/api/v1/posts/stream`, {}, (event, data) => (event === 'post' ? (data as { id: string }).id : undefined));
    await feed.start();
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
    // Reads were retried on the other room. A post in flight on the dead one may fail (it is never
    // sent twice: it could have been written), as a 503 with Retry-After, nothing else.
    expect(Object.keys(window.byOutcome).filter((kind) => kind !== 'write 503')).toEqual([]);
    expect(window.withoutRetryAfter).toBe(0);
    expect(load.acknowledged.size).toBeGreaterThan(0);
    const listed = await listedPostIds(cluster.origin);
    expect([...load.acknowledged.keys()].filter((id) => !listed.has(id))).toEqual([]);
    // Edge's one room stream moved to the other room: its subscriber saw every post, on one connection.
    expect(await feed.awaitKeys([...load.acknowledged.keys()], 5_000)).toEqual([]);
    await feed.stop();
    expect(feed.cuts).toEqual([]);
  }, 40_000);

  it('backs off: a process that crashes again soon after its restart waits twice as long', async () => {
    const before = cluster.restarts('room');
    process.kill(cluster.pid('room'), 'SIGKILL');
    await cluster.restarted('room', before, 15_000);
    expect(cluster.lines.join('\n')).toMatch(/room exited \(SIGKILL\) after [\d.]+ s; restarting it in 1\.0 s \(restart 2\)/);
    // Health's own gRPC channel may reconnect before the one posts use: wait for a post itself.
    await until('a post is accepted again', async () => (await post('after the second restart')).status === 201, 15_000);
  }, 30_000);

  it('cuts a live feed whose edge was killed, so its client resumes with Last-Event-ID and misses nothing', async () => {
    const feed = new LiveFeed(`${cluster.origin}/api/v1/posts/stream`, {}, (event, data) => (event === 'post' ? (data as { id: string }).id : undefined));
    await feed.start();
    // A post seen before the kill gives the feed its Last-Event-ID.
    const seen = ((await (await post('before the edge is killed')).json()) as { id: string }).id;
    expect(await feed.awaitKeys([seen], 5_000)).toEqual([]);
    const before = cluster.restarts('edge-1');
    process.kill(cluster.pid('edge-1'), 'SIGKILL');
    await cluster.restarted('edge-1', before, 15_000);
    let made = '';
    await until(
      'a post is accepted again',
      async () => {
        const response = await post('after the edge came back');
        if (response.status === 201) made = ((await response.json()) as { id: string }).id;
        return response.status === 201;
      },
      15_000,
    );
    // The router ended the stream it was relaying from the dead edge (it would otherwise stay open,
    // silent), the feed reconnected to the new edge, and the post reached it.
    expect(await feed.awaitKeys([made], 10_000)).toEqual([]);
    await feed.stop();
    expect(feed.cuts.length).toBeGreaterThan(0);
  }, 30_000);

  it('degrades health and fails writes fast while Redis is down, and recovers by itself when it returns', async () => {
    const kept = await post('written before Redis stopped');
    expect(kept.status).toBe(201);
    const keptId = ((await kept.json()) as { id: string }).id;
    const restartsBefore = ['room', 'room-2', 'messaging', 'auth', 'edge-1'].map((name) => cluster.restarts(name));
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
    expect(['room', 'room-2', 'messaging', 'auth', 'edge-1'].map((name) => cluster.restarts(name))).toEqual(restartsBefore);
  }, 30_000);
});
