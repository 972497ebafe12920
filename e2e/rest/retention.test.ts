import { ConfigError } from '@agentroom/kit/config';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { until } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { type Problem, post, signUp } from '../support/agent.js';

interface Post {
  id: string;
  text: string;
}

interface ListBody {
  data: Post[];
  has_more: boolean;
  next_cursor: string | null;
}

/** The smallest retention there is: a full page. */
const RETENTION = 50;
const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };

let redis: LocalRedis;

beforeAll(async () => {
  redis = await startRedisServer();
});

afterAll(async () => {
  await redis.stop();
});

async function get(app: Embedded, path: string): Promise<Response> {
  return fetch(`${app.urls.baseUrl}${path}`);
}

async function notFound(response: Response, parameter: string): Promise<void> {
  expect(response.status).toBe(404);
  const problem = (await response.json()) as Problem;
  expect(problem.type).toMatch(/\/problems\/post-not-found$/);
  expect(problem.parameter).toBe(parameter);
}

describe.each([
  ['memory', (): Record<string, string> => ({})],
  ['redis', (): Record<string, string> => ({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: `retention${Date.now()}` })],
])('posts retention, %s', (_name, storage) => {
  let app: Embedded;
  let token: string;
  let first: { body: Post; key: string };
  let reply: Post;
  /** A cursor issued while the first posts were kept: it pages to positions the retention takes. */
  let oldCursor: string;

  beforeAll(async () => {
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      ...storage(),
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      POSTS_RETENTION: String(RETENTION),
    });
    token = (await signUp(app, ['posts:write'], 'scout', ada)).token;
    const made = await post(app, token, { text: 'the first post' }, { 'idempotency-key': 'first-post' });
    expect(made.status).toBe(201);
    first = { body: (await made.json()) as Post, key: 'first-post' };
    const answered = await post(app, token, { text: 'a reply to the first', reply_to: first.body.id });
    expect(answered.status).toBe(201);
    reply = (await answered.json()) as Post;
    const page = (await (await get(app, '/posts?limit=1')).json()) as ListBody;
    expect(page.data[0]?.id).toBe(reply.id);
    oldCursor = page.next_cursor ?? '';
    for (let i = 1; i <= RETENTION; i += 1) expect((await post(app, token, { text: `post ${i}` })).status).toBe(201);
    // The record (docs/decisions.md §35) keeps what the room lets go, within a second of each post.
    await until('the record holds the newest post', async () => {
      const found = await get(app, `/posts/search?q=${encodeURIComponent(`"post ${RETENTION}"`)}`);
      return found.status === 200 && ((await found.json()) as { data: unknown[] }).data.length > 0;
    });
  });

  afterAll(async () => {
    await app.stop();
  });

  it('reads a post the retention took, and its thread, from the record; a reply to it is refused as to an unknown post', async () => {
    expect(await (await get(app, `/posts/${first.body.id}`)).json()).toEqual({ ...first.body, replyCount: 1 });
    const thread = (await (await get(app, `/posts/${first.body.id}/replies`)).json()) as ListBody;
    expect(thread.data.map((p) => p.id)).toEqual([reply.id]);
    expect(await (await get(app, `/posts/${reply.id}`)).json()).toEqual(reply);
    // Writing goes to the room alone, which holds the thread no more.
    await notFound(await post(app, token, { text: 'too late', reply_to: first.body.id }), 'reply_to');
    await notFound(await get(app, '/posts/1-0'), 'post_id');
  });

  it('keeps the newest posts, and pages them to the end, past them into the record', async () => {
    const seen: string[] = [];
    let path = '/posts?limit=20';
    for (;;) {
      const response = await get(app, path);
      expect(response.status).toBe(200);
      const page = (await response.json()) as ListBody;
      seen.push(...page.data.map((p) => p.text));
      if (page.next_cursor === null) break;
      path = `/posts?limit=20&cursor=${page.next_cursor}`;
    }
    expect(seen).toHaveLength(RETENTION + 2);
    expect(seen[0]).toBe(`post ${RETENTION}`);
    expect(seen.slice(-3)).toEqual(['post 1', 'a reply to the first', 'the first post']);
  });

  it("answers a cursor into posts the retention took with the record's page after it", async () => {
    const response = await get(app, `/posts?limit=10&cursor=${oldCursor}`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ object: 'list', data: [{ ...first.body, replyCount: 1 }], has_more: false, next_cursor: null });
  });

  it('replays the first answer of a key whose post the retention took since, exactly', async () => {
    const again = await post(app, token, { text: 'the first post' }, { 'idempotency-key': first.key });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toEqual(first.body);
  });
});

describe('POSTS_RETENTION', () => {
  it('is 0 (every post) or at least a full page: anything else is refused before the room starts', async () => {
    const failure: unknown = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), POSTS_RETENTION: '10' }).then(
      async (app) => {
        await app.stop();
        return undefined;
      },
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(ConfigError);
    expect((failure as Error).message).toContain('POSTS_RETENTION="10"');
  });
});
