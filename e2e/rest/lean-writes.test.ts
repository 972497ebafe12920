import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { signUp } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';

/**
 * `POST {base_url}/posts` with a JSON body, at the literal path and with a query string (which
 * createPost ignores): edge's one request path (services/edge/src/http/pipeline.ts) counts the call
 * and claims its idempotency key in one step for both. Both must answer alike, byte for byte where
 * nothing differs by nature (ids, times, request ids), and share one key space (docs/decisions.md §28).
 */

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
/** Headers whose values differ from one answer to the next by nature. */
const VOLATILE = new Set(['date', 'x-request-id', 'content-length', 'ratelimit-remaining', 'ratelimit-reset', 'keep-alive']);

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

async function answerOf(response: Response): Promise<Answer> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => (headers[name] = value));
  return { status: response.status, headers, body: (await response.json()) as Record<string, unknown> };
}

/** The headers of an answer but for those that differ by nature, and their values. */
function steady(answer: Answer): Record<string, string> {
  return Object.fromEntries(Object.entries(answer.headers).filter(([name]) => !VOLATILE.has(name)));
}

/** A post without what differs from one post to the next. */
function withoutIdentity(body: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, createdAt: _createdAt, ...rest } = body;
  return rest;
}

describe.each([
  ['memory storage', false],
  ['Redis storage', true],
] as const)('POST {base_url}/posts at its literal path and with a query string (%s)', (_name, withRedis) => {
  let redis: LocalRedis | undefined;
  let app: Embedded;
  let writer: string;
  let reader: string;
  /** The literal path, no query. */
  let plain: string;
  /** The same route, with a query string. */
  let routed: string;

  beforeAll(async () => {
    redis = withRedis ? await startRedisServer() : undefined;
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      ...(redis ? { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'lean' } : {}),
    });
    writer = (await signUp(app, ['posts:write'], 'lean-writer', ada)).token;
    reader = (await signUp(app, ['agents:read'], 'lean-reader', ada)).token;
    plain = `${app.urls.baseUrl}/posts`;
    routed = `${app.urls.baseUrl}/posts?via=routes`;
  }, 60_000);

  afterAll(async () => {
    await app.stop();
    await redis?.stop();
  });

  /** `token` null sends none; left out, the writer's. */
  const send = (url: string, body: string | Buffer<ArrayBuffer>, headers: Record<string, string> = {}, token: string | null = writer): Promise<Response> =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...headers },
      body,
    });

  /** The same request on both paths: the same status, headers and problem. */
  async function alike(body: string | Buffer<ArrayBuffer>, headers: Record<string, string> = {}, token?: string | null): Promise<[Answer, Answer]> {
    const a = await answerOf(await send(plain, body, headers, token));
    const b = await answerOf(await send(routed, body, headers, token));
    expect(a.status).toBe(b.status);
    expect(steady(a)).toEqual(steady(b));
    return [a, b];
  }

  it('posts alike, with the same headers (CORS, RateLimit, X-Request-Id)', async () => {
    const [a, b] = await alike(JSON.stringify({ text: 'posted twice, once per path' }));
    expect(a.status).toBe(201);
    expect(withoutIdentity(a.body)).toEqual(withoutIdentity(b.body));
    expect(a.body.id).not.toBe(b.body.id);
    for (const answer of [a, b]) {
      expect(answer.headers).toMatchObject({ 'access-control-allow-origin': '*', 'content-type': 'application/json; charset=utf-8' });
      expect(Object.keys(answer.headers)).toEqual(expect.arrayContaining(['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'x-request-id']));
    }
  });

  it('counts each request once, whichever path takes it', async () => {
    const remaining = async (url: string): Promise<number> => Number((await send(url, JSON.stringify({ text: 'counted' }))).headers.get('ratelimit-remaining'));
    const first = await remaining(plain);
    expect(await remaining(routed)).toBe(first - 1);
    expect(await remaining(plain)).toBe(first - 2);
  });

  it('keeps a client request id', async () => {
    const response = await send(plain, JSON.stringify({ text: 'with my own id' }), { 'x-request-id': 'lean-test-1234' });
    expect(response.headers.get('x-request-id')).toBe('lean-test-1234');
  });

  it('shares one key space: a key first used on one path replays on the other, and refuses another input', async () => {
    const key = `lean-${withRedis ? 'redis' : 'memory'}-1`;
    const first = await answerOf(await send(plain, JSON.stringify({ text: 'one post, two paths' }), { 'idempotency-key': key }));
    expect(first.status).toBe(201);
    const replayed = await answerOf(await send(routed, JSON.stringify({ text: 'one post, two paths' }), { 'idempotency-key': key }));
    expect(replayed).toMatchObject({ status: 201, body: first.body, headers: { 'idempotent-replayed': 'true' } });
    const other = `lean-${withRedis ? 'redis' : 'memory'}-2`;
    const second = await answerOf(await send(routed, JSON.stringify({ text: 'the other way round' }), { 'idempotency-key': other }));
    expect(await answerOf(await send(plain, JSON.stringify({ text: 'the other way round' }), { 'idempotency-key': other }))).toMatchObject({
      status: 201,
      body: second.body,
      headers: { 'idempotent-replayed': 'true' },
    });
    const [mismatch] = await alike(JSON.stringify({ text: 'not what was first sent' }), { 'idempotency-key': key });
    expect(mismatch.body).toMatchObject({ status: 422, type: `${app.urls.siteUrl}/problems/idempotency-mismatch` });
  });

  it.each([
    ['malformed JSON', '{"text": "unclosed', {}, 400, 'parse_error'],
    ['a body over 64 KiB', `{"text":"${'x'.repeat(70_000)}"}`, {}, 413, 'invalid_request'],
    ['bytes that are not UTF-8', Buffer.concat([Buffer.from('{"text":"bad '), Buffer.from([0xff, 0xfe]), Buffer.from(' bytes"}')]), {}, 400, 'invalid_request'],
    ['a charset the parser does not read', '{"text":"latin"}', { 'content-type': 'application/json; charset=latin1' }, 400, 'invalid_request'],
    ['text too long', JSON.stringify({ text: 'y'.repeat(501) }), {}, 400, 'invalid_request'],
    ['a control character', '{"text":"a\\u0000b"}', {}, 400, 'invalid_request'],
    ['a key over 255 characters', '{"text":"x"}', { 'idempotency-key': 'k'.repeat(256) }, 400, 'invalid_request'],
    ['a JSON array', '[1, 2]', {}, 400, 'invalid_request'],
  ] as const)('refuses %s alike', async (_what, body, headers, status, code) => {
    const [a, b] = await alike(body, headers);
    expect(a.body).toMatchObject({ status, code });
    expect(a.body).toEqual(b.body);
  });

  it('refuses a missing token, a bad one and a missing scope alike', async () => {
    for (const token of [null, 'agt_not_a_real_token', reader]) {
      const [a, b] = await alike(JSON.stringify({ text: 'not allowed' }), {}, token);
      expect(a.status).toBeGreaterThanOrEqual(401);
      expect(a.body).toEqual(b.body);
    }
  });
});
