import { randomUUID } from 'node:crypto';
import { approvedToken, Load, type RunningCluster, sleep, startCluster, until } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface Page {
  data: { id: string; text: string }[];
  has_more: boolean;
  next_cursor: string | null;
}

interface Hits {
  data: { post: { id: string; text: string } }[];
  next_cursor: string | null;
}

interface Problem {
  status: number;
  detail: string;
  remedy: string;
  retry_after: number;
}

/** The room's window: more posts than it are made first, so the oldest live in the record alone. */
const RETENTION = 1_000;
const BEFORE = RETENTION + 50;
/** A real outage, as the issue tells it. */
const OUTAGE_MS = 30_000;
/** Three agents writing about 10 posts a second between them for the whole test, and one reader. */
const WRITERS = 3;
const PAUSE_MS = 280;

/**
 * The cluster as deployed (separate processes, Redis, a real PostgreSQL) under a steady load of
 * posts, with its PostgreSQL stopped for 30 s and started again on the same port and data: the room
 * keeps accepting and serving posts; what only the record holds (search, a page past the room's
 * window) answers 503 with Retry-After; once PostgreSQL is back the record catches up, and holds
 * every acknowledged post exactly once.
 */
describe('PostgreSQL stopped for 30 s under load, in the cluster', () => {
  let cluster: RunningCluster;
  let api: string;
  const tokens: string[] = [];
  const made: string[] = [];

  const get = (path: string): Promise<Response> => fetch(`${api}${path}`, { signal: AbortSignal.timeout(10_000) });

  async function create(token: string, text: string): Promise<string> {
    const response = await fetch(`${api}/posts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, 'idempotency-key': randomUUID() },
      body: JSON.stringify({ text }),
      signal: AbortSignal.timeout(10_000),
    });
    expect(response.status).toBe(201);
    return ((await response.json()) as { id: string }).id;
  }

  /** Every post id the room lists, newest first, paged through GET /posts from the first page down past the window into the record. */
  async function listed(): Promise<string[]> {
    const ids: string[] = [];
    let path = '/posts?limit=50';
    for (;;) {
      const response = await get(path);
      expect(response.status, path).toBe(200);
      const page = (await response.json()) as Page;
      ids.push(...page.data.map((post) => post.id));
      if (page.next_cursor === null) return ids;
      path = `/posts?limit=50&cursor=${page.next_cursor}`;
    }
  }

  /** Every post the record finds by a word all of them have, newest first: what the record holds, through search. */
  async function searched(): Promise<string[]> {
    const ids: string[] = [];
    let path = '/posts/search?q=chaos&sort=newest&limit=50';
    for (;;) {
      const response = await get(path);
      if (response.status !== 200) throw new Error(`search answered ${response.status}`);
      const hits = (await response.json()) as Hits;
      ids.push(...hits.data.map((hit) => hit.post.id));
      if (hits.next_cursor === null) return ids;
      path = `/posts/search?q=chaos&sort=newest&limit=50&cursor=${hits.next_cursor}`;
    }
  }

  beforeAll(async () => {
    cluster = await startCluster({ EDGE_REPLICAS: '1', POSTS_RETENTION: String(RETENTION) }, { restartablePostgres: true });
    api = `${cluster.origin}/api/v1`;
    for (let i = 0; i < WRITERS; i += 1) tokens.push(await approvedToken(cluster.origin, ['posts:write'], `keeper-${i}`));
    for (let i = 0; i < BEFORE; i += 10) {
      const batch = Array.from({ length: Math.min(10, BEFORE - i) }, (_, n) => create(tokens[n % WRITERS] ?? '', `chaos prefill ${i + n}`));
      made.push(...(await Promise.all(batch)));
    }
    // In the room's order (a batch's posts were made at once).
    made.sort(byStreamId);
    await until('the record holds the posts made before', async () => (await searched()).length === BEFORE, 30_000);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('the room accepts and serves every post meanwhile; search and pages past the window answer 503 with Retry-After; then the record catches up with every post once', async () => {
    const postgres = cluster.postgres!;
    // A cursor from before the outage, past the room's window: the page after the room's 1,000 newest posts.
    let cursor = '';
    for (let read = 0; read < RETENTION; read += 50) {
      const page = (await (await get(`/posts?limit=50${cursor === '' ? '' : `&cursor=${cursor}`}`)).json()) as Page;
      cursor = page.next_cursor ?? '';
    }
    const past = await get(`/posts?limit=50&cursor=${cursor}`);
    expect(past.status).toBe(200);
    expect(((await past.json()) as Page).data.map((post) => post.id)).toEqual(made.slice(0, 50).reverse());

    const load = new Load(cluster.origin, tokens, { readers: 1, writers: WRITERS, deadlineMs: 5_000, pauseMs: PAUSE_MS });
    load.start();
    await sleep(2_000);

    const stoppedAt = Date.now();
    await postgres.stop();
    const refused = async (path: string): Promise<void> => {
      const response = await get(path);
      expect(response.status, path).toBe(503);
      expect(Number(response.headers.get('retry-after')), path).toBeGreaterThan(0);
      const problem = (await response.json()) as Problem;
      expect(problem.retry_after).toBeGreaterThan(0);
      expect(problem.detail).toContain("the room's newest posts and writing still work");
      expect(problem.remedy.length).toBeGreaterThan(0);
    };
    await sleep(1_000);
    await refused('/posts/search?q=chaos');
    await refused(`/posts?limit=50&cursor=${cursor}`);
    expect((await get('/health')).status).toBe(200);
    await sleep(OUTAGE_MS - 3_000 - (Date.now() - stoppedAt));
    // Still refused at the end of the outage, and the room's window serves every post made meanwhile.
    await refused('/posts/search?q=chaos');
    await refused(`/posts?limit=50&cursor=${cursor}`);
    const duringOutage = [...load.acknowledged].filter(([, at]) => at >= stoppedAt).map(([id]) => id);
    const seen = new Set<string>();
    let path = '/posts?limit=50';
    while (!duringOutage.every((id) => seen.has(id))) {
      const response = await get(path);
      expect(response.status, path).toBe(200);
      const page = (await response.json()) as Page;
      for (const post of page.data) seen.add(post.id);
      expect(page.next_cursor, 'the posts made during the outage are all on the first pages').not.toBeNull();
      path = `/posts?limit=50&cursor=${page.next_cursor ?? ''}`;
    }
    await sleep(OUTAGE_MS - (Date.now() - stoppedAt));
    await postgres.start();
    const restartedAt = Date.now();

    // The room never noticed: every post and every read of the window answered, during the outage as before it.
    const outage = load.stats(stoppedAt, restartedAt);
    expect(outage.byOutcome).toEqual({});
    expect(outage.writesAcknowledged).toBeGreaterThan((OUTAGE_MS / 1_000) * 2);
    // No process of the cluster gave up meanwhile.
    expect(cluster.restarts('record')).toBe(0);
    expect(duringOutage.length).toBeGreaterThan(0);

    // The record catches up with what was made meanwhile, while posts go on being made.
    await sleep(3_000);
    await load.stop();
    expect(load.stats(0).byOutcome).toEqual({});

    // Every acknowledged post, exactly once, in the room's order: through search, which only the
    // record answers, and through the pages (the window, then the record past it).
    const acknowledged = [...made, ...[...load.acknowledged.keys()].sort(byStreamId)].reverse();
    let found: string[] = [];
    const deadline = Date.now() + 20_000;
    do {
      found = await searched().catch(() => []);
      if (acknowledged.every((id) => found.includes(id))) break;
      await sleep(250);
    } while (Date.now() < deadline);
    const missing = acknowledged.filter((id) => !found.includes(id));
    expect({ missing: missing.length, madeDuringTheOutage: missing.filter((id) => duringOutage.includes(id)).length }).toEqual({
      missing: 0,
      madeDuringTheOutage: 0,
    });
    expect(found).toEqual(acknowledged);
    expect(await listed()).toEqual(acknowledged);
    // A phrase of a post made during the outage finds it.
    const last = duringOutage.at(-1) ?? '';
    const lastText = ((await (await get(`/posts/${last}`)).json()) as { text: string }).text;
    const phrase = (await (await get(`/posts/search?q=${encodeURIComponent(`"${lastText}"`)}`)).json()) as Hits;
    expect(phrase.data.map((hit) => hit.post.id)).toEqual([last]);
  }, 90_000);
});

function byStreamId(a: string, b: string): number {
  const [aMs = 0, aSeq = 0] = a.split('-').map(Number);
  const [bMs = 0, bSeq = 0] = b.split('-').map(Number);
  return aMs - bMs || aSeq - bSeq;
}
