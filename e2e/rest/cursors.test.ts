import { ConfigError } from '@agentroom/kit/config';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { type Problem, post, signUp } from '../support/agent.js';

interface ListBody {
  data: { id: string; text: string }[];
  has_more: boolean;
  next_cursor: string | null;
}

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
const alan = { name: 'Alan Turing', password: 'the imitation game' };
const SECRET = 'a shared cursor secret of 32 bytes or more, for tests';

function get(app: Embedded, path: string, token?: string): Promise<Response> {
  return fetch(`${app.urls.baseUrl}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
}

async function page(app: Embedded, path: string, token?: string): Promise<ListBody> {
  const response = await get(app, path, token);
  expect(response.status).toBe(200);
  return (await response.json()) as ListBody;
}

/** The answer to a cursor the list did not issue: 400 invalid_request, problem invalid-cursor, parameter cursor. */
async function refusedCursor(response: Response): Promise<void> {
  expect(response.status).toBe(400);
  const body = (await response.json()) as Problem;
  expect(body).toMatchObject({ code: 'invalid_request', parameter: 'cursor' });
  expect(body.type).toMatch(/\/problems\/invalid-cursor$/);
}

/** The same cursor with one character changed (still base64url, same length). */
function edited(cursor: string, at: number): string {
  const index = at < 0 ? cursor.length + at : at;
  const swapped = cursor[index] === 'A' ? 'B' : 'A';
  return `${cursor.slice(0, index)}${swapped}${cursor.slice(index + 1)}`;
}

describe('cursors are signed by the deployment and bound to their list (embedded)', () => {
  let app: Embedded;
  let alice: string;
  let bob: string;
  let aliceId: string;
  let bobId: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    const scopes = ['posts:write', 'messages:read', 'messages:write'];
    alice = (await signUp(app, scopes, 'alice', ada)).token;
    bob = (await signUp(app, scopes, 'bob', alan)).token;
    const agents = (await page(app, '/agents?limit=50')) as unknown as { data: { id: string; agentName: string }[] };
    aliceId = agents.data.find((a) => a.agentName === 'alice')?.id ?? '';
    bobId = agents.data.find((a) => a.agentName === 'bob')?.id ?? '';
    for (let i = 1; i <= 5; i += 1) {
      expect((await post(app, alice, { text: `post ${i}` })).status).toBe(201);
      for (const [token, to] of [
        [alice, bobId],
        [bob, aliceId],
      ] as const) {
        const sent = await fetch(`${app.urls.baseUrl}/messages`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ to, text: `message ${i}` }),
        });
        expect(sent.status).toBe(201);
      }
    }
  });

  afterAll(async () => {
    await app.stop();
  });

  it('still pages posts and an inbox with the next_cursor they issue, short and URL-safe', async () => {
    const first = await page(app, '/posts?limit=2');
    expect(first.next_cursor).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    const second = await page(app, `/posts?limit=2&cursor=${first.next_cursor ?? ''}`);
    expect(second.data.map((p) => p.text)).toEqual(['post 3', 'post 2']);
    const inbox = await page(app, '/messages?limit=2', bob);
    expect(inbox.next_cursor).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    const next = await page(app, `/messages?limit=2&cursor=${inbox.next_cursor ?? ''}`, bob);
    expect(next.data.map((m) => m.text)).toEqual(['message 3', 'message 2']);
  });

  it('issues cursors of the form the OpenAPI document gives for cursor, and refuses what falls outside it', async () => {
    const document = (await (await fetch(`${app.urls.siteUrl}/openapi.json`)).json()) as {
      paths: Record<string, { get: { parameters: { name: string; schema: { pattern: string } }[] } }>;
    };
    for (const [path, token] of [
      ['/posts', undefined],
      ['/messages', bob],
      ['/notifications', bob],
    ] as const) {
      const pattern = new RegExp(document.paths[`/v1${path}`]?.get.parameters.find((p) => p.name === 'cursor')?.schema.pattern ?? '');
      const issued = (await page(app, `${path}?limit=1`, token)).next_cursor ?? '';
      expect(issued, path).toMatch(pattern);
      for (const outside of ['0', 'AAAA', `B${issued.slice(1)}`]) {
        expect(outside).not.toMatch(pattern);
        await refusedCursor(await get(app, `${path}?cursor=${outside}`, token));
      }
    }
  });

  it('refuses a hand-made base64url cursor on /posts with 400 invalid_request, parameter cursor', async () => {
    const posts = await page(app, '/posts?limit=50');
    const id = posts.data[2]?.id ?? '';
    // What an unsigned cursor looked like: base64url of a versioned position.
    await refusedCursor(await get(app, `/posts?cursor=${Buffer.from(`v1:${id}`).toString('base64url')}`));
    await refusedCursor(await get(app, `/posts?cursor=${Buffer.from(id).toString('base64url')}`));
    // Our own shape with a made-up tag.
    const real = (await page(app, '/posts?limit=2')).next_cursor ?? '';
    const bytes = Buffer.from(real, 'base64url');
    bytes.fill(7, bytes.length - 16);
    await refusedCursor(await get(app, `/posts?cursor=${bytes.toString('base64url')}`));
  });

  it('refuses a real cursor with one character edited, or cut short', async () => {
    const real = (await page(app, '/posts?limit=2')).next_cursor ?? '';
    for (const at of [0, 5, -1]) await refusedCursor(await get(app, `/posts?cursor=${edited(real, at)}`));
    await refusedCursor(await get(app, `/posts?cursor=${real.slice(0, -2)}`));
  });

  it('refuses a posts cursor on /messages and a messages cursor on /posts', async () => {
    const postsCursor = (await page(app, '/posts?limit=2')).next_cursor ?? '';
    const inboxCursor = (await page(app, '/messages?limit=2', bob)).next_cursor ?? '';
    await refusedCursor(await get(app, `/messages?cursor=${postsCursor}`, bob));
    await refusedCursor(await get(app, `/posts?cursor=${inboxCursor}`));
  });

  it("refuses a cursor from one agent's inbox on another agent's inbox", async () => {
    const bobsCursor = (await page(app, '/messages?limit=2', bob)).next_cursor ?? '';
    await refusedCursor(await get(app, `/messages?cursor=${bobsCursor}`, alice));
    // Bob's own still works.
    expect((await page(app, `/messages?limit=2&cursor=${bobsCursor}`, bob)).data).toHaveLength(2);
  });
});

describe('the cursor secret (CURSOR_SECRET)', () => {
  let redis: LocalRedis;
  const started: Embedded[] = [];

  async function deployment(env: Record<string, string> = {}): Promise<Embedded> {
    const app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: 'cursors',
      ...env,
    });
    started.push(app);
    return app;
  }

  beforeAll(async () => {
    redis = await startRedisServer();
  });

  afterAll(async () => {
    for (const app of started) await app.stop();
    await redis.stop();
  });

  it("lets processes that share the secret (and the storage) page with each other's cursors; others refuse them", async () => {
    const one = await deployment({ CURSOR_SECRET: SECRET });
    const two = await deployment({ CURSOR_SECRET: SECRET });
    const random = await deployment();
    const { token } = await signUp(one, ['posts:write'], 'pager', ada);
    for (let i = 1; i <= 4; i += 1) expect((await post(one, token, { text: `shared ${i}` })).status).toBe(201);
    const first = await page(one, '/posts?limit=2');
    const cursor = first.next_cursor ?? '';
    expect((await page(two, `/posts?limit=2&cursor=${cursor}`)).data.map((p) => p.text)).toEqual(['shared 2', 'shared 1']);
    // The embedded default without CURSOR_SECRET draws its own secret at start.
    await refusedCursor(await get(random, `/posts?limit=2&cursor=${cursor}`));
    // Three whole deployments, each starting its record's PGlite.
  }, 60_000);

  it('refuses to start with a secret shorter than 32 bytes, and does not print it', async () => {
    const short = 'too-short-secret-31-bytes-long!';
    expect(Buffer.byteLength(short)).toBe(31);
    const failure = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), CURSOR_SECRET: short }).then(
      async (app) => {
        started.push(app);
        return undefined;
      },
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(ConfigError);
    const message = (failure as Error).message;
    expect(message).toContain('CURSOR_SECRET');
    expect(message).toContain('32 bytes');
    expect(message).not.toContain(short);
  });
});
