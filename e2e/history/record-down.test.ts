import { approvedToken, type RunningCluster, startCluster, until } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface Page {
  data: { id: string; text: string }[];
  has_more: boolean;
  next_cursor: string | null;
}

interface Problem {
  status: number;
  code: string;
  remedy: string;
  detail?: string;
  retry_after?: number;
}

/** The smallest retention the room takes; more posts than it, so the oldest live in the record alone. */
const RETENTION = 50;
const POSTS = 80;

/**
 * The cluster as deployed (separate processes, Redis and a real PostgreSQL): the record process is
 * stopped (SIGSTOP: it neither answers nor closes its connections, as a hung host) while the room
 * keeps working; only what the record alone holds answers 503 with Retry-After.
 */
describe('the record stopped, in the cluster: search and pages past the window wait, the room does not', () => {
  let cluster: RunningCluster;
  let api: string;
  let token: string;
  let stopped = false;
  const made: string[] = [];

  const get = (path: string): Promise<Response> => fetch(`${api}${path}`, { signal: AbortSignal.timeout(10_000) });

  beforeAll(async () => {
    cluster = await startCluster({ EDGE_REPLICAS: '1', POSTS_RETENTION: String(RETENTION) });
    api = `${cluster.origin}/api/v1`;
    token = await approvedToken(cluster.origin, ['posts:write'], 'lamplighter');
    for (let i = 1; i <= POSTS; i += 1) {
      const response = await fetch(`${api}/posts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ text: i === 1 ? 'the harbour lantern was lit at dusk' : `evening post ${i}` }),
      });
      expect(response.status).toBe(201);
      made.push(((await response.json()) as { id: string }).id);
    }
    await until('the record holds every post', async () => {
      const found = await get(`/posts/search?q=${encodeURIComponent(`"evening post ${POSTS}"`)}`);
      return found.status === 200 && ((await found.json()) as { data: unknown[] }).data.length === 1;
    });
  }, 120_000);

  afterAll(async () => {
    if (stopped) process.kill(cluster.pid('record'), 'SIGCONT');
    await cluster?.stop();
  });

  it('finds the oldest post by a phrase, and pages from the newest post to the oldest, while the record runs', async () => {
    const found = (await (await get(`/posts/search?q=${encodeURIComponent('"harbour lantern"')}`)).json()) as { data: { post: { id: string } }[] };
    expect(found.data.map((hit) => hit.post.id)).toEqual([made[0]]);
    const seen: string[] = [];
    let path = '/posts?limit=30';
    for (;;) {
      const page = (await (await get(path)).json()) as Page;
      seen.push(...page.data.map((p) => p.id));
      if (page.next_cursor === null) break;
      path = `/posts?limit=30&cursor=${page.next_cursor}`;
    }
    expect(seen).toEqual([...made].reverse());
  });

  it("never asks the record for the first page of a room with more posts than a page, nor for a page inside the room's window", async () => {
    /** How many reads of posts the record has answered, from its own metrics. */
    const recordReads = async (): Promise<number> => {
      const text = await (await fetch(cluster.metrics.record ?? '')).text();
      return text
        .split('\n')
        .filter((line) => /^agentroom_grpc_server_handled_seconds_count\{.*method="(ListArchivedPosts|GetArchivedPost|ListArchivedReplies)"/.test(line))
        .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
    };
    const before = await recordReads();
    for (let i = 0; i < 20; i += 1) {
      const first = (await (await get('/posts')).json()) as Page;
      expect(first.has_more).toBe(true);
      // From the room itself too, past edge's memory.
      const fresh = (await (await fetch(`${api}/posts?limit=20`, { headers: { 'cache-control': 'no-cache' } })).json()) as Page;
      expect((await get(`/posts?limit=20&cursor=${fresh.next_cursor ?? ''}`)).status).toBe(200);
      expect((await get(`/posts/${made.at(-1) ?? ''}`)).status).toBe(200);
    }
    expect(await recordReads()).toBe(before);
    // The page that ends the room is the one that asks it.
    const deep = (await (await get('/posts?limit=45')).json()) as Page;
    await get(`/posts?limit=45&cursor=${deep.next_cursor ?? ''}`);
    expect(await recordReads()).toBeGreaterThan(before);
  });

  it('answers search, a page past the window and an archived post 503 with Retry-After; the first page and writing still work; /health stays 200', async () => {
    // A cursor into the record, taken while it answers.
    const second = (await (await get('/posts?limit=50')).json()) as Page;
    expect(second.has_more).toBe(true);
    process.kill(cluster.pid('record'), 'SIGSTOP');
    stopped = true;
    const refused = async (path: string): Promise<void> => {
      const response = await get(path);
      expect(response.status, path).toBe(503);
      expect(Number(response.headers.get('retry-after')), path).toBeGreaterThan(0);
      const problem = (await response.json()) as Problem;
      expect(problem.code).toBe('internal');
      expect(problem.retry_after).toBeGreaterThan(0);
      expect(problem.remedy.length).toBeGreaterThan(0);
      expect(problem.detail).toContain("the room's newest posts");
    };
    await refused(`/posts/search?q=lantern`);
    await refused(`/posts?limit=50&cursor=${second.next_cursor ?? ''}`);
    await refused(`/posts/${made[0] ?? ''}`);
    await refused(`/posts/${made[0] ?? ''}/replies`);
    // The room's own pages: the first, and one inside the window.
    const first = await get('/posts?limit=20');
    expect(first.status).toBe(200);
    const firstPage = (await first.json()) as Page;
    expect(firstPage.data[0]?.id).toBe(made.at(-1));
    expect((await get(`/posts?limit=20&cursor=${firstPage.next_cursor ?? ''}`)).status).toBe(200);
    expect((await get(`/posts/${made.at(-1) ?? ''}`)).status).toBe(200);
    const written = await fetch(`${api}/posts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ text: 'still posting while the record sleeps' }),
    });
    expect(written.status).toBe(201);
    const health = await get('/health');
    expect(health.status).toBe(200);
    const body = (await health.json()) as { status: string; checks: Record<string, string>; record_lag_ms: number | null };
    expect(body.status).toBe('healthy');
    expect(body.checks.record).toBe('unreachable');
    expect(body.record_lag_ms).toBeNull();

    process.kill(cluster.pid('record'), 'SIGCONT');
    stopped = false;
    await until('search answers again', async () => (await get('/posts/search?q=lantern')).status === 200);
  });
});
