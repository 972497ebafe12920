import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { closeHttpServer, startAdminServer } from '@agentroom/kit/process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { RoomClient } from '../support/room-client.js';

/** The product on a free port, so its own URLs (problem types, remedies) are the ones the test calls. */
async function startApp(env: Record<string, string> = {}): Promise<Embedded> {
  return startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000', ...env });
}

function expectRateLimitHeaders(response: Response): void {
  expect(Number(response.headers.get('ratelimit-limit'))).toBeGreaterThan(0);
  expect(Number(response.headers.get('ratelimit-remaining'))).toBeGreaterThanOrEqual(0);
  const reset = Number(response.headers.get('ratelimit-reset'));
  expect(reset).toBeGreaterThan(0);
  expect(reset).toBeLessThanOrEqual(86_400);
}

interface Problem {
  type: string;
  title: string;
  status: number;
  code: string;
  remedy: string;
  detail?: string;
}

async function problem(response: Response, status: number, code: string): Promise<Problem> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expectRateLimitHeaders(response);
  const text = await response.text();
  // Nothing internal leaks: no stack frames, no Redis keys, no file paths.
  expect(text).not.toMatch(/at \w+ \(|node_modules|\.ts:\d|\{main\}|ar:room|ar:quota/);
  const body = JSON.parse(text) as Problem;
  expect(body).toMatchObject({ status, code });
  expect(body.type).toMatch(/^http:\/\/localhost:\d+\/problems\/[a-z-]+$/);
  expect(body.title.length).toBeGreaterThan(0);
  expect(body.remedy.length).toBeGreaterThan(10);
  return body;
}

describe('REST through the router (embedded, memory storage)', () => {
  let app: Embedded;
  let base: string;
  let room: RoomClient;
  let agentId: string;

  beforeAll(async () => {
    app = await startApp();
    base = `${app.urls.baseUrl}`;
    room = new RoomClient(`127.0.0.1:${app.roomPort}`);
    agentId = await room.agent('scout', 'Ada Lovelace');
  });

  afterAll(async () => {
    room.close();
    await app.stop();
  });

  it('lists posts as a PostList, newest first, with the fields of docs/product.md', async () => {
    await room.post(agentId, 'first words');
    await room.post(agentId, 'second words');
    const response = await fetch(`${base}/posts?limit=2`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expectRateLimitHeaders(response);
    const body = (await response.json()) as { object: string; data: Record<string, unknown>[]; has_more: boolean; next_cursor: string | null };
    expect(body.object).toBe('list');
    expect(body.data.map((p) => p.text)).toEqual(['second words', 'first words']);
    expect(Object.keys(body.data[0] ?? {}).sort()).toEqual(['agentId', 'agentName', 'createdAt', 'humanLabel', 'id', 'text', 'via']);
    expect(body.data[0]).toMatchObject({ agentId, agentName: 'scout', humanLabel: 'Ada Lovelace', via: 'rest' });
    expect(typeof body.has_more).toBe('boolean');
    expect('next_cursor' in body).toBe(true);
  });

  it('pages with next_cursor, and the cursor stays stable while new posts arrive', async () => {
    for (let i = 1; i <= 7; i += 1) await room.post(agentId, `stable ${i}`);
    const first = (await (await fetch(`${base}/posts?limit=3`)).json()) as { data: { text: string }[]; next_cursor: string; has_more: boolean };
    expect(first.data.map((p) => p.text)).toEqual(['stable 7', 'stable 6', 'stable 5']);
    expect(first.has_more).toBe(true);
    expect(first.next_cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    await room.post(agentId, 'arrived in between');
    const second = (await (await fetch(`${base}/posts?limit=3&cursor=${first.next_cursor}`)).json()) as { data: { text: string }[] };
    expect(second.data.map((p) => p.text)).toEqual(['stable 4', 'stable 3', 'stable 2']);
  });

  it('answers the last page with has_more false and next_cursor null', async () => {
    const all = (await (await fetch(`${base}/posts?limit=50`)).json()) as { has_more: boolean; next_cursor: string | null };
    expect(all).toMatchObject({ has_more: false, next_cursor: null });
  });

  it('lists agents as a list, most recent first, with scopes', async () => {
    const second = await room.agent('builder', 'Grace Hopper');
    const response = await fetch(`${base}/agents`);
    expect(response.status).toBe(200);
    expectRateLimitHeaders(response);
    const body = (await response.json()) as { object: string; data: Record<string, unknown>[]; has_more: boolean };
    expect(body.object).toBe('list');
    expect(body.data[0]).toMatchObject({ id: second, agentName: 'builder', humanLabel: 'Grace Hopper', scopes: ['posts:write'] });
    expect(Object.keys(body.data[0] ?? {}).sort()).toEqual(['agentName', 'createdAt', 'humanLabel', 'id', 'scopes']);
    const limited = (await (await fetch(`${base}/agents?limit=1`)).json()) as { data: unknown[]; has_more: boolean };
    expect(limited.data).toHaveLength(1);
    expect(limited.has_more).toBe(true);
  });

  it.each(['0', '51', 'abc', '1.5'])('answers limit=%s with 400 invalid_request naming the valid range', async (limit) => {
    for (const path of ['posts', 'agents']) {
      const body = await problem(await fetch(`${base}/${path}?limit=${limit}`), 400, 'invalid_request');
      expect(body.remedy).toMatch(/1 to 50/);
    }
  });

  it('answers a cursor that is not ours with 400 invalid_request', async () => {
    for (const cursor of ['bm90LW91cnM', 'garbage!!', Buffer.from('1-0').toString('base64url')]) {
      const body = await problem(await fetch(`${base}/posts?cursor=${encodeURIComponent(cursor)}`), 400, 'invalid_request');
      expect(body.type).toMatch(/\/problems\/invalid-cursor$/);
    }
  });

  it('answers an unknown path with a 404 problem that says where the API is', async () => {
    const body = await problem(await fetch(`${base}/nothing-here`), 404, 'not_found');
    expect(body.remedy).toContain(base);
    await problem(await fetch(`http://127.0.0.1:${app.port}/no/such/page`), 404, 'not_found');
  });

  it('answers a body over 64 KiB with 413, whatever its content type', async () => {
    for (const type of ['application/json', 'text/plain']) {
      const response = await fetch(`${base}/posts`, { method: 'POST', headers: { 'content-type': type }, body: `"${'x'.repeat(70_000)}"` });
      await problem(response, 413, 'invalid_request');
    }
  });

  it('answers malformed JSON with 400 parse_error', async () => {
    const response = await fetch(`${base}/posts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"text": "unclosed' });
    await problem(response, 400, 'parse_error');
  });

  it('reports degraded health with memory storage: 503 with the checks', async () => {
    const response = await fetch(`${base}/health`);
    expect(response.status).toBe(503);
    expectRateLimitHeaders(response);
    expect(await response.json()).toEqual({
      status: 'degraded',
      storage: 'memory',
      checks: { storage: 'memory', room: 'serving', messaging: 'serving', record: 'serving' },
      record_lag_ms: expect.any(Number) as unknown as number,
      version: expect.stringMatching(/^\d+\.\d+\.\d+/) as unknown as string,
    });
  });

  it('counts every call: RateLimit-Remaining goes down by one per request', async () => {
    const a = Number((await fetch(`${base}/posts?limit=1`)).headers.get('ratelimit-remaining'));
    const b = Number((await fetch(`${base}/nope`)).headers.get('ratelimit-remaining'));
    expect(b).toBe(a - 1);
  });

  it('counts requests in Prometheus metrics by service, route and status', async () => {
    await fetch(`${base}/posts?limit=1`);
    const metrics = await startAdminServer(0, '127.0.0.1');
    const text = await (await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).text();
    await closeHttpServer(metrics.server, 1_000);
    expect(text).toMatch(/agentroom_http_request_duration_seconds_count\{service="edge",method="GET",route="\/api\/v1\/posts",status="200"\} [1-9]/);
    expect(text).toMatch(/agentroom_grpc_server_handled_seconds_count\{service="room",method="ListPosts",code="OK"\} [1-9]/);
    expect(text).toContain('process_cpu_seconds_total');
  });

  it('renders the room page with posts as text, never HTML', async () => {
    await room.post(agentId, '<img src=x onerror=alert(1)> & friends');
    const response = await fetch(`http://127.0.0.1:${app.port}/`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expectRateLimitHeaders(response);
    const html = await response.text();
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt; &amp; friends');
    expect(html).not.toContain('<img src=x');
    expect(html).toContain('Ada Lovelace');
    // The live script, and the feed it follows from the newest post shown.
    expect(html).toContain(`<script type="module" src="${app.urls.siteUrl}/assets/room.js"></script>`);
    expect(html).toMatch(new RegExp(`data-stream="${app.urls.baseUrl}/posts/stream" data-after="\\d+-\\d+"`));
  });
});

describe('the daily quota per client address', () => {
  let app: Embedded;
  let base: string;

  beforeAll(async () => {
    app = await startApp({ QUOTA_PER_ADDRESS: '5' });
    base = `${app.urls.baseUrl}`;
  });

  afterAll(() => app.stop());

  it('refuses the call after the quota with 429 and Retry-After, and ignores a forged X-Forwarded-For', async () => {
    const remaining: number[] = [];
    for (let i = 0; i < 5; i += 1) {
      // A client cannot reset its count by claiming another address: the router sets X-Forwarded-For.
      const response = await fetch(`${base}/posts`, { headers: { 'x-forwarded-for': `10.0.0.${i}` } });
      expect(response.status).toBe(200);
      remaining.push(Number(response.headers.get('ratelimit-remaining')));
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);
    const refused = await fetch(`${base}/posts`);
    const body = await problem(refused, 429, 'rate_limited');
    expect(Number(refused.headers.get('retry-after'))).toBe(Number(refused.headers.get('ratelimit-reset')));
    expect(refused.headers.get('ratelimit-remaining')).toBe('0');
    expect(body.remedy).toMatch(/midnight UTC/);
  });
});

describe('with Redis', () => {
  let redis: LocalRedis;
  let app: Embedded;

  beforeAll(async () => {
    redis = await startRedisServer();
    app = await startApp({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'http' });
  });

  afterAll(async () => {
    await app.stop();
    await redis.stop();
  });

  it('reports healthy: 200 with storage redis', async () => {
    const response = await fetch(`http://127.0.0.1:${app.port}/api/v1/health`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ status: 'healthy', storage: 'redis', checks: { storage: 'ok', room: 'serving', messaging: 'serving' } });
  });

  it('serves posts stored in Redis', async () => {
    const room = new RoomClient(`127.0.0.1:${app.roomPort}`);
    const agent = await room.agent('persisted', 'Lin');
    await room.post(agent, 'kept in a stream');
    room.close();
    const body = (await (await fetch(`http://127.0.0.1:${app.port}/api/v1/posts?limit=1`)).json()) as { data: { text: string }[] };
    expect(body.data[0]?.text).toBe('kept in a stream');
  });
});

describe('SIGTERM with a request in flight', () => {
  it('lets the request complete, then exits 0', async () => {
    const port = await freePort();
    const root = fileURLToPath(new URL('../../', import.meta.url));
    const server = spawn(process.execPath, ['launcher/dist/start.js'], {
      cwd: root,
      env: { ...process.env, PORT: String(port), LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<number | null>((resolve) => server.once('exit', resolve));
    let out = '';
    await new Promise<void>((resolve) =>
      server.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString('utf8');
        if (out.includes('Agent Room is running')) resolve();
      }),
    );
    // Headers and half the body go out, then SIGTERM, then the rest of the body.
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write('POST /api/v1/in-flight HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"text":');
    await new Promise((resolve) => setTimeout(resolve, 100));
    server.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 200));
    socket.end('"hi"}');
    await closed;
    expect(await exited).toBe(0);
    const response = Buffer.concat(chunks).toString('utf8');
    expect(response).toMatch(/^HTTP\/1\.1 404 /);
    expect(response).toMatch(/ratelimit-remaining/i);
    expect(out).toContain('"msg":"shutting down"');
    expect(out).toContain('"msg":"stopped"');
  });
});
