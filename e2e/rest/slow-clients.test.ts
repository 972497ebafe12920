import { connect, type Socket } from 'node:net';
import { loadConfig } from '@agentroom/kit/config';
import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routerEnv } from '@agentroom/gateway';
import { embeddedEnv } from '../../launcher/src/config.js';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { post, signUp } from '../support/agent.js';
import { SseClient } from '../support/sse.js';

const HEADERS_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 1_500;
/** Node's defaults are 60 s for the headers and 300 s for the request: closed well before either means ours apply. */
const CLOSED_WITHIN_MS = 5_000;

interface Trickle {
  socket: Socket;
  /** Everything the server sent, once it closed the connection; and how long after the first byte. */
  closed: Promise<{ answer: string; afterMs: number }>;
}

/**
 * A slowloris: sends `head` at once, then `trickle` one byte every 200 ms, as long as the server
 * keeps the connection (the bytes never end the request).
 */
async function slowloris(port: number, head: string, trickle = 'X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'): Promise<Trickle> {
  const socket = connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  const received: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => received.push(chunk));
  socket.on('error', () => undefined);
  const began = Date.now();
  socket.write(head);
  let sent = 0;
  const timer = setInterval(() => {
    if (socket.writable) socket.write(trickle[sent++ % trickle.length] as string);
  }, 200);
  const closed = new Promise<{ answer: string; afterMs: number }>((resolve) =>
    socket.once('close', () => {
      clearInterval(timer);
      resolve({ answer: Buffer.concat(received).toString('utf8'), afterMs: Date.now() - began });
    }),
  );
  return { socket, closed };
}

// Concurrent: each test mostly waits for a timeout, and together they show the slow ones hold nobody up.
describe.concurrent('slow clients', () => {
  let app: Embedded;

  beforeAll(async () => {
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      LIVE_HEARTBEAT_MS: '200',
    });
  });

  afterAll(() => app.stop());

  it('answers 408 and closes sockets whose headers trickle in, and serves everyone else meanwhile', async () => {
    const host = new URL(app.urls.baseUrl).host;
    const lorises = await Promise.all(Array.from({ length: 20 }, () => slowloris(app.port, `GET /api/v1/posts HTTP/1.1\r\nHost: ${host}\r\n`)));
    // While they hold their connections, normal requests are served at once.
    for (let i = 0; i < 5; i++) {
      const response = await fetch(`${app.urls.baseUrl}/posts`);
      expect(response.status).toBe(200);
      await response.arrayBuffer();
    }
    for (const { closed } of lorises) {
      const { answer, afterMs } = await closed;
      expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
      expect(answer).toContain('application/problem+json');
      expect(afterMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
      expect(afterMs).toBeLessThan(CLOSED_WITHIN_MS);
    }
  });

  it('closes a socket whose request line never ends, and one that never sends a byte', async () => {
    const loris = await slowloris(app.port, 'G', 'ET /api/v1/posts?padding=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa');
    const began = Date.now();
    const silent = connect(app.port, '127.0.0.1');
    silent.on('error', () => undefined);
    silent.resume();
    const silentClosed = new Promise<number>((resolve) => silent.once('close', () => resolve(Date.now() - began)));
    const { answer, afterMs } = await loris.closed;
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(afterMs).toBeLessThan(CLOSED_WITHIN_MS);
    expect(await silentClosed).toBeLessThan(CLOSED_WITHIN_MS);
  });

  it('closes a socket whose body trickles in past the request timeout', async () => {
    const host = new URL(app.urls.baseUrl).host;
    const loris = await slowloris(
      app.port,
      `POST /api/v1/posts HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"text":"`,
      'a',
    );
    const { afterMs } = await loris.closed;
    expect(afterMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    expect(afterMs).toBeLessThan(CLOSED_WITHIN_MS);
  });

  it('keeps an event stream open past both timeouts: they bound the request, not the answer', async () => {
    const { token } = await signUp(app, ['posts:write'], 'patient', { name: 'Pat Ience', password: 'a long enough password' });
    const began = Date.now();
    const client = await SseClient.connect(`${app.urls.baseUrl}/posts/stream`);
    // Heartbeats every 200 ms: wait for them until well past the request timeout and a check of it.
    const beats = Math.ceil((REQUEST_TIMEOUT_MS * 2) / 200);
    await client.waitForComments(beats, REQUEST_TIMEOUT_MS * 4);
    expect(Date.now() - began).toBeGreaterThan(REQUEST_TIMEOUT_MS * 1.5);
    const created = await post(app, token, { text: 'still listening' });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const [event] = await client.waitForEvents(1);
    expect(event?.id).toBe(id);
    client.close();
  });
});

describe('router timeouts configuration', () => {
  it('defaults to 10 s for the headers and 30 s for the whole request', () => {
    const embedded = loadConfig(embeddedEnv, {});
    expect([embedded.HEADERS_TIMEOUT_MS, embedded.REQUEST_TIMEOUT_MS]).toEqual([10_000, 30_000]);
    const router = loadConfig(routerEnv, { EDGE_URLS: 'http://127.0.0.1:1', AUTH_URLS: 'http://127.0.0.1:2' });
    expect([router.HEADERS_TIMEOUT_MS, router.REQUEST_TIMEOUT_MS]).toEqual([10_000, 30_000]);
  });

  it('refuses a timeout that is not a whole number of milliseconds in range', () => {
    for (const value of ['0', '-1', 'soon', '1.5']) expect(() => loadConfig(embeddedEnv, { HEADERS_TIMEOUT_MS: value })).toThrow(/HEADERS_TIMEOUT_MS/);
    expect(() => loadConfig(embeddedEnv, { REQUEST_TIMEOUT_MS: '0' })).toThrow(/REQUEST_TIMEOUT_MS/);
  });

  it('refuses a headers timeout longer than the request timeout when the router starts', async () => {
    await expect(
      startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), HEADERS_TIMEOUT_MS: '5000', REQUEST_TIMEOUT_MS: '1000' }),
    ).rejects.toThrow(/HEADERS_TIMEOUT_MS/);
  });
});
