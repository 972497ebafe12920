import { freePort } from '@agentroom/kit/local';
import { processMetricsJson } from '@agentroom/kit/metrics';
import { until } from '@agentroom/testkit';
import { OPERATIONS } from '@agentroom/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { a2aClient, partsOf, rpcFailure, send } from '../support/a2a.js';
import { type Problem, post, signUp } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { callTool, mcpClient } from '../support/mcp.js';

interface Post {
  id: string;
  text: string;
  agentName: string;
  threadId?: string;
  replyTo?: string;
  replyCount?: number;
}

interface Page {
  data: Post[];
  has_more: boolean;
  next_cursor: string | null;
}

interface Hit {
  post: Post;
  snippet: string;
  highlights: { start: number; end: number }[];
}

interface Results {
  object: 'list';
  data: Hit[];
  has_more: boolean;
  next_cursor: string | null;
}

interface Thread extends Page {
  post: Post;
}

/** The smallest retention the room takes: a full page. Everything older lives in the record alone. */
const RETENTION = 50;
/** Posts made after the old thread: more than the room keeps, so the thread is gone from it. */
const LATER = 70;
const PHRASE = 'lighthouse keeper logbook';
const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };

/** The text of each highlighted range of a hit's snippet, by code points. */
function highlighted(hit: Hit): string[] {
  const points = [...hit.snippet];
  return hit.highlights.map(({ start, end }) => points.slice(start, end).join(''));
}

describe('an agent finds a post older than the room keeps, and reads its whole thread (embedded, record in PGlite)', () => {
  let app: Embedded;
  let token: string;
  let root: Post;
  const replies: Post[] = [];
  /** Every post made, oldest first. */
  const made: Post[] = [];

  const get = (path: string): Promise<Response> => fetch(`${app.urls.baseUrl}${path}`);
  const json = async <T>(path: string, status = 200): Promise<T> => {
    const response = await get(path);
    expect(response.status, `${path}: ${await response.clone().text()}`).toBe(status);
    return (await response.json()) as T;
  };
  const search = (query: Record<string, string>): Promise<Response> => get(`/posts/search?${new URLSearchParams(query).toString()}`);

  beforeAll(async () => {
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '1000000',
      POSTS_RETENTION: String(RETENTION),
    });
    token = (await signUp(app, ['posts:write'], 'keeper', ada)).token;
    const create = async (body: Record<string, string>): Promise<Post> => {
      const response = await post(app, token, body);
      expect(response.status).toBe(201);
      const created = (await response.json()) as Post;
      made.push(created);
      return created;
    };
    root = await create({ text: `Found the old ${PHRASE} in the attic: entries from 1887 onwards.` });
    replies.push(await create({ text: 'Does it say when the lamp was first lit?', reply_to: root.id }));
    replies.push(await create({ text: 'The first entry is the lighting, in March.', reply_to: replies[0]?.id ?? '' }));
    for (let i = 1; i <= LATER; i += 1) await create({ text: `later post number ${i}` });
    // The record follows the room within a second: wait until it holds the newest post.
    const newest = made.at(-1)?.id;
    await until(
      'the record holds every post',
      async () => {
        const found = (await (await search({ q: `"later post number ${LATER}"` })).json()) as Results;
        return found.data?.some((hit) => hit.post.id === newest) === true;
      },
      15_000,
    );
  }, 90_000);

  afterAll(async () => {
    await app?.stop();
  });

  it('the room itself no longer holds the thread: its window is the newest posts', async () => {
    const first = await json<Page>(`/posts?limit=${RETENTION}`);
    expect(first.data.map((p) => p.id)).not.toContain(root.id);
  });

  it('finds the old post by a phrase over REST: the post, a snippet with the phrase highlighted', async () => {
    const found = await json<Results>(`/posts/search?${new URLSearchParams({ q: `"${PHRASE}"` }).toString()}`);
    expect(found.data.map((hit) => hit.post.id)).toEqual([root.id]);
    const [hit] = found.data as [Hit];
    expect(hit.post).toMatchObject({ id: root.id, agentName: 'keeper', text: root.text, replyCount: 2 });
    expect(hit.snippet).toContain('lighthouse');
    expect(highlighted(hit).join(' ').toLowerCase()).toContain('lighthouse');
    expect(found.has_more).toBe(false);
    expect(found.next_cursor).toBeNull();
  });

  it('reads the archived post and its whole thread, with the same shapes as the room answers', async () => {
    const one = await json<Post>(`/posts/${root.id}`);
    expect(one).toEqual({ ...root, replyCount: 2 });
    const thread = await json<Thread>(`/posts/${root.id}/replies`);
    expect(thread.post.id).toBe(root.id);
    expect(thread.data.map((p) => p.id)).toEqual(replies.map((r) => r.id));
    expect(thread.data.map((p) => p.threadId)).toEqual([root.id, root.id]);
    // The replies a page at a time, with the record's cursor.
    const page1 = await json<Thread>(`/posts/${root.id}/replies?limit=1`);
    expect(page1.data.map((p) => p.id)).toEqual([replies[0]?.id]);
    const page2 = await json<Thread>(`/posts/${root.id}/replies?limit=1&cursor=${page1.next_cursor ?? ''}`);
    expect(page2.data.map((p) => p.id)).toEqual([replies[1]?.id]);
    expect(page2.has_more).toBe(false);
    await json<Problem>('/posts/1-0', 404);
  });

  it.each([7, 20, RETENTION])('pages from the newest post to the oldest across the boundary, %i at a time: no repeat, no gap', async (limit) => {
    const seen: string[] = [];
    let path = `/posts?limit=${limit}`;
    for (let pages = 0; pages < 100; pages += 1) {
      const page = await json<Page>(path);
      expect(page.data.length).toBeLessThanOrEqual(limit);
      if (page.has_more) expect(page.data).toHaveLength(limit);
      seen.push(...page.data.map((p) => p.id));
      if (page.next_cursor === null) break;
      path = `/posts?limit=${limit}&cursor=${page.next_cursor}`;
    }
    expect(seen).toEqual(made.map((p) => p.id).reverse());
  });

  it('refuses a bad query with a 400 problem and a remedy, never a 500', async () => {
    const cases: [Record<string, string>, string][] = [
      [{ q: '' }, 'q'],
      [{ q: '   ' }, 'q'],
      [{ q: 'x'.repeat(1_000) }, 'q'],
      [{ q: 'lighthouse', autor: 'a_1' }, 'autor'],
      [{ q: 'lighthouse', since: 'yesterday' }, 'since'],
      [{ q: 'lighthouse', sort: 'oldest' }, 'sort'],
      [{ q: 'lighthouse', author: 'not an id' }, 'author'],
    ];
    for (const [query, parameter] of cases) {
      const response = await search(query);
      expect(response.status, JSON.stringify(query)).toBe(400);
      const problem = (await response.json()) as Problem;
      expect(problem.parameter, JSON.stringify(query)).toBe(parameter);
      expect(problem.remedy).toContain(`${app.urls.baseUrl}/posts/search`);
    }
    // SQL-looking text is words like any other: no error, and no post of this room matches it.
    const sqlish = await search({ q: "'; DROP TABLE posts; --" });
    expect(sqlish.status).toBe(200);
  });

  it('narrows by author, thread and time, and sorts newest first', async () => {
    const byThread = await json<Results>(`/posts/search?q=lamp&thread=${root.id}`);
    expect(byThread.data.map((hit) => hit.post.id)).toEqual([replies[0]?.id]);
    const before = await json<Results>(`/posts/search?q=lighthouse&until=${encodeURIComponent('2000-01-01T00:00:00Z')}`);
    expect(before.data).toEqual([]);
    const newest = await json<Results>('/posts/search?q=later&sort=newest&limit=3');
    expect(newest.data.map((hit) => hit.post.text)).toEqual([`later post number ${LATER}`, `later post number ${LATER - 1}`, `later post number ${LATER - 2}`]);
    expect(newest.has_more).toBe(true);
    const next = await json<Results>(`/posts/search?q=later&sort=newest&limit=3&cursor=${newest.next_cursor ?? ''}`);
    expect(next.data.map((hit) => hit.post.text)).toEqual([
      `later post number ${LATER - 3}`,
      `later post number ${LATER - 4}`,
      `later post number ${LATER - 5}`,
    ]);
  });

  it('over MCP: room_search_posts (no token) answers the hits as structured content, then room_read_thread the whole thread', async () => {
    const client = await mcpClient(app);
    try {
      const tools = await client.listTools();
      const tool = tools.tools.find((t) => t.name === 'room_search_posts');
      expect(tool?.outputSchema).toBeDefined();
      expect(tool?.annotations?.readOnlyHint).toBe(true);
      // The SDK client checks structuredContent against the tool's output schema itself; the row's own schema too.
      const result = await callTool(client, 'room_search_posts', { q: `"${PHRASE}"` });
      expect(result.isError).toBeFalsy();
      const found = OPERATIONS.searchPosts.output.parse(result.structuredContent);
      expect(found.data.map((hit) => hit.post.id)).toEqual([root.id]);
      expect(result.content[0]?.text).toContain('**');
      const thread = await callTool(client, 'room_read_thread', { postId: found.data[0]?.post.threadId ?? found.data[0]?.post.id });
      const read = OPERATIONS.listReplies.output.parse(thread.structuredContent);
      expect([read.post.id, ...read.data.map((p) => p.id)]).toEqual([root.id, ...replies.map((r) => r.id)]);
      const refused = await callTool(client, 'room_search_posts', { q: 'lighthouse', autor: 'a_1' });
      expect(refused.isError).toBe(true);
    } finally {
      await client.close();
    }
  });

  it('over A2A: a data part naming search-posts, then read-thread, on the SDK client', async () => {
    const client = await a2aClient(app.urls.siteUrl);
    const message = (value: Record<string, unknown>) => ({
      messageId: `history-${Math.random()}`,
      contextId: '',
      taskId: '',
      role: 1,
      parts: [{ content: { $case: 'data' as const, value }, metadata: undefined, filename: '', mediaType: 'application/json' }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    });
    const found = partsOf(await send(client, message({ skill: 'search-posts', q: `"${PHRASE}"` })));
    const results = OPERATIONS.searchPosts.output.parse(found.data);
    expect(results.data.map((hit) => hit.post.id)).toEqual([root.id]);
    expect(found.text).toContain(`[post ${root.id}, thread ${root.id}]`);
    const thread = partsOf(await send(client, message({ skill: 'read-thread', postId: root.id })));
    const read = OPERATIONS.listReplies.output.parse(thread.data);
    expect([read.post.id, ...read.data.map((p) => p.id)]).toEqual([root.id, ...replies.map((r) => r.id)]);
    const unknown = await rpcFailure(send(client, message({ skill: 'summarise' })));
    expect(unknown.code).toBe(-32602);
    expect(unknown.problem.parameter).toBe('skill');
    const bad = await rpcFailure(send(client, message({ skill: 'search-posts', q: '' })));
    expect(bad.code).toBe(-32602);
    expect(bad.problem.parameter).toBe('q');
  });

  it('/health reports the record, reachable and its lag', async () => {
    const response = await get('/health');
    const health = (await response.json()) as { checks: Record<string, string>; record_lag_ms: number | null };
    expect(health.checks.record).toBe('serving');
    expect(typeof health.record_lag_ms).toBe('number');
  });
});

describe('a room that never let a post go: its last page asks the record once, then no more', () => {
  let app: Embedded;

  /** How many pages of posts the record has answered in this process. */
  const recordPages = async (): Promise<number> =>
    // Every thread's figures: the record serves from a thread of its own (docs/decisions.md §39).
    (await processMetricsJson())
      .filter((metric) => metric.name === 'agentroom_grpc_server_handled_seconds')
      .flatMap((metric) => metric.values)
      .filter(
        (value) => 'metricName' in value && value.metricName === 'agentroom_grpc_server_handled_seconds_count' && value.labels.method === 'ListArchivedPosts',
      )
      .reduce((sum, value) => sum + value.value, 0);

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '1000000' });
    const { token } = await signUp(app, ['posts:write'], 'counter', ada);
    for (let i = 1; i <= 4; i += 1) expect((await post(app, token, { text: `count ${i}` })).status).toBe(201);
    await until('the record holds every post', async () => {
      const found = (await (await fetch(`${app.urls.baseUrl}/posts/search?q=${encodeURIComponent('"count 4"')}`)).json()) as Results;
      return found.data.length === 1;
    });
  }, 60_000);

  afterAll(async () => {
    await app?.stop();
  });

  it('answers the full last page as the room does, and learns that the record holds nothing older', async () => {
    const first = (await (await fetch(`${app.urls.baseUrl}/posts?limit=2`)).json()) as Page;
    expect(first.has_more).toBe(true);
    const lastPath = `${app.urls.baseUrl}/posts?limit=2&cursor=${first.next_cursor ?? ''}`;
    const before = await recordPages();
    const last = (await (await fetch(lastPath)).json()) as Page;
    expect(last.data.map((p) => p.text)).toEqual(['count 2', 'count 1']);
    expect(last).toMatchObject({ has_more: false, next_cursor: null });
    expect(await recordPages()).toBe(before + 1);
    for (let i = 0; i < 5; i += 1) expect(await (await fetch(lastPath)).json()).toEqual(last);
    expect(await recordPages()).toBe(before + 1);
  });
});
