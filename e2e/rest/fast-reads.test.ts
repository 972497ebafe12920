import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { signUp } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { RoomClient } from '../support/room-client.js';

/**
 * `GET {base_url}/posts` with a plain query (`limit`, `cursor`, both or none), and the same request
 * with a query every parser reads the same but which is not in its plainest form (a trailing `&`):
 * edge's one request path (services/edge/src/http/pipeline.ts) answers both alike, byte for byte
 * but for what differs from one answer to the next by nature, from its memory of the first page or
 * the room, whichever storage holds the quota (docs/decisions.md §28).
 */

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
/** Headers whose values differ from one answer to the next by nature. */
const VOLATILE = new Set(['date', 'x-request-id', 'ratelimit-remaining', 'ratelimit-reset', 'keep-alive']);

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

async function answerOf(response: Response): Promise<Answer> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => (headers[name] = value));
  return { status: response.status, headers, body: await response.text() };
}

/** The headers of an answer but for those that differ by nature, in the order they came. */
function steady(answer: Answer): [string, string][] {
  return Object.entries(answer.headers).filter(([name]) => !VOLATILE.has(name));
}

describe.each([
  ['memory storage', false],
  ['Redis storage', true],
] as const)('GET {base_url}/posts with a plain query and with one that is not (%s)', (_name, withRedis) => {
  let redis: LocalRedis | undefined;
  let app: Embedded;
  let reader: string;

  beforeAll(async () => {
    redis = withRedis ? await startRedisServer() : undefined;
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      ...(redis ? { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'fast' } : {}),
    });
    reader = (await signUp(app, ['agents:read'], 'fast-reader', ada)).token;
    const room = new RoomClient(`127.0.0.1:${app.roomPort}`);
    try {
      const agent = await room.agent('fast-poster', 'Ada');
      for (let i = 1; i <= 130; i += 1) await room.post(agent, `fast ${i}`);
    } finally {
      room.close();
    }
  }, 60_000);

  afterAll(async () => {
    await app?.stop();
    await redis?.stop();
  });

  const get = (query: string, headers: Record<string, string> = {}): Promise<Answer> => fetch(`${app.urls.baseUrl}/posts${query}`, { headers }).then(answerOf);

  /** The same request with the plain query and with a trailing `&`: the same status, headers and bytes. */
  async function alike(plain: string, headers: Record<string, string> = {}): Promise<Answer> {
    const fast = await get(plain, headers);
    const routed = await get(plain === '' ? '?&' : `${plain}&`, headers);
    expect(fast.status, plain).toBe(routed.status);
    expect(steady(fast), plain).toEqual(steady(routed));
    expect(fast.body, plain).toBe(routed.body);
    return fast;
  }

  it('answers every page alike, first page and pages after a cursor, at every limit', async () => {
    for (const limit of [undefined, 1, 7, 20, 50]) {
      let cursor: string | null = null;
      let posts = 0;
      do {
        const query: string = [limit === undefined ? '' : `limit=${limit}`, cursor === null ? '' : `cursor=${cursor}`].filter(Boolean).join('&');
        const answer = await alike(query === '' ? '' : `?${query}`);
        expect(answer.status).toBe(200);
        const page = JSON.parse(answer.body) as { data: unknown[]; next_cursor: string | null };
        posts += page.data.length;
        cursor = page.next_cursor;
      } while (cursor !== null);
      expect(posts).toBe(130);
    }
  }, 60_000);

  it('answers with the contract headers, and keeps a client request id', async () => {
    const answer = await get('?limit=2', { 'x-request-id': 'fast-read-1234' });
    expect(answer.headers).toMatchObject({
      'x-request-id': 'fast-read-1234',
      'access-control-allow-origin': '*',
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(answer.body)),
    });
    expect(Object.keys(answer.headers)).toEqual(
      expect.arrayContaining(['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'access-control-expose-headers']),
    );
  });

  it('counts each request once, whichever path takes it', async () => {
    const remaining = async (query: string): Promise<number> => Number((await get(query)).headers['ratelimit-remaining']);
    const first = await remaining('?limit=3');
    expect(await remaining('?limit=3&')).toBe(first - 1);
    expect(await remaining('?limit=3')).toBe(first - 2);
  });

  it.each([
    ['a limit out of range', '?limit=0', 400],
    ['a limit over 50', '?limit=51', 400],
    ['a cursor it never issued', '?limit=5&cursor=AjE3OTU3MDA2ODU0NTAtMwJna4wG1JniFuFr5cLRM0Y', 400],
  ] as const)('refuses %s alike', async (_what, query, status) => {
    const answer = await alike(query);
    expect(answer.status).toBe(status);
    expect(answer.headers['content-type']).toBe('application/problem+json; charset=utf-8');
  });

  it('serves a token, and a bad one, alike', async () => {
    for (const authorization of [`Bearer ${reader}`, 'Bearer agt_not_a_real_token', 'Basic abc']) {
      const answer = await alike('?limit=4', { authorization });
      expect([200, 401]).toContain(answer.status);
    }
  });

  it('reads the room with Cache-Control: no-cache, alike', async () => {
    const answer = await alike('?limit=6', { 'cache-control': 'no-cache' });
    expect(answer.body).toBe((await get('?limit=6')).body);
  });
});

describe('GET {base_url}/posts with the daily quota spent, on both paths', () => {
  let app: Embedded;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '3' });
  }, 60_000);

  afterAll(async () => {
    await app?.stop();
  });

  it('refuses alike, with Retry-After', async () => {
    const get = (query: string): Promise<Answer> => fetch(`${app.urls.baseUrl}/posts${query}`).then(answerOf);
    for (let i = 0; i < 3; i += 1) expect((await get('?limit=1')).status).toBe(200);
    const fast = await get('?limit=1');
    const routed = await get('?limit=1&');
    expect(fast.status).toBe(429);
    // The seconds to midnight may tick between the two answers: in Retry-After, retry_after and the
    // remedy's "Wait N seconds" (whose digits may change the Content-Length).
    const untimed = (answer: Answer): unknown => {
      const body = JSON.parse(answer.body) as { remedy?: string };
      return {
        headers: steady(answer).filter(([name]) => name !== 'retry-after' && name !== 'content-length'),
        body: { ...body, retry_after: 0, remedy: body.remedy?.replace(/Wait \d+ seconds/, 'Wait N seconds') },
      };
    };
    expect(untimed(fast)).toEqual(untimed(routed));
    expect(Number(fast.headers['retry-after'])).toBeGreaterThan(0);
  });
});
