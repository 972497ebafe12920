import { connect, type Socket } from 'node:net';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { registry } from '@agentroom/kit/metrics';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { post, type Problem, signUp } from '../support/agent.js';
import { RoomClient } from '../support/room-client.js';
import { SseClient } from '../support/sse.js';

interface PostBody {
  id: string;
  agentName: string;
  text: string;
  via: string;
}

const grace = { name: 'Grace Hopper', password: 'nanoseconds are short' };

async function makePost(app: Embedded, token: string, text: string): Promise<PostBody> {
  const response = await post(app, token, { text });
  expect(response.status).toBe(201);
  return (await response.json()) as PostBody;
}

async function endedCount(reason: string): Promise<number> {
  const metric = await registry.getSingleMetric('agentroom_live_streams_ended_total')?.get();
  return metric?.values.find((v) => v.labels.feed === 'posts' && v.labels.reason === reason)?.value ?? 0;
}

/** How many posts this process has fanned out to posts-stream subscribers (agentroom_live_fanout_seconds). */
async function fannedOut(): Promise<number> {
  const text = await registry.getSingleMetricAsString('agentroom_live_fanout_seconds');
  return Number(/^agentroom_live_fanout_seconds_count (\d+)$/m.exec(text)?.[1] ?? 0);
}

describe.each(['memory', 'redis'] as const)('the posts stream (embedded, %s)', (storage) => {
  let redis: LocalRedis | undefined;
  let app: Embedded;
  let token: string;
  let stream: string;

  beforeAll(async () => {
    if (storage === 'redis') redis = await startRedisServer();
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      LIVE_HEARTBEAT_MS: '100',
      LIVE_MAX_BUFFERED_BYTES: '16384',
      ...(redis ? { REDIS_URL: redis.url } : {}),
    });
    token = (await signUp(app, ['posts:write'], 'streamer', grace)).token;
    stream = `${app.urls.baseUrl}/posts/stream`;
  });

  afterAll(async () => {
    await app.stop();
    await redis?.stop();
  });

  it('delivers a post made after subscribing, with its id as the event id and the REST shape as data', async () => {
    const client = await SseClient.connect(stream);
    expect(client.response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(client.response.headers.get('ratelimit-limit')).not.toBeNull();
    expect(client.response.headers.get('access-control-allow-origin')).toBe('*');
    const before = await fannedOut();
    const made = await makePost(app, token, 'hello, live room');
    const [event] = await client.waitForEvents(1, 1_000);
    client.close();
    expect(event).toMatchObject({ id: made.id, event: 'post' });
    expect(JSON.parse(event?.data ?? '')).toEqual(made);
    // SREs see how long handing a post to every subscriber takes.
    expect(await fannedOut()).toBe(before + 1);
  });

  it('resumes after Last-Event-ID with exactly the posts made while disconnected, in order', async () => {
    const first = await SseClient.connect(stream);
    const seen = await makePost(app, token, 'seen before the drop');
    await first.waitForEvents(1);
    first.close();
    const missed = [await makePost(app, token, 'missed one'), await makePost(app, token, 'missed two'), await makePost(app, token, 'missed three')];

    const expected = missed.map((p) => p.id);
    for (const how of ['header', 'query'] as const) {
      const again =
        how === 'header'
          ? await SseClient.connect(stream, { 'last-event-id': seen.id })
          : await SseClient.connect(`${stream}?last_event_id=${encodeURIComponent(seen.id)}`);
      await again.waitForEvents(expected.length);
      expected.push((await makePost(app, token, `live after resuming by ${how}`)).id);
      const events = await again.waitForEvents(expected.length);
      // Nothing missed, nothing twice: everything after the last id seen, in order, then live.
      expect(events.map((e) => e.id)).toEqual(expected);
      // One more live post: anything sent twice would have come before it.
      const last = await makePost(app, token, `last after resuming by ${how}`);
      const all = await again.waitForEvents(expected.length + 1);
      again.close();
      expect(all.map((e) => e.id)).toEqual([...expected, last.id]);
      expected.push(last.id);
    }
  });

  it('resumes from an id older than the live buffer, through storage', async () => {
    // A fresh app: its feed starts at the newest post when the first subscriber comes.
    const fresh = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      ...(redis ? { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'fresh' } : {}),
    });
    try {
      const { token: freshToken } = await signUp(fresh, ['posts:write'], 'early-bird', grace);
      const [a, b, c] = [await makePost(fresh, freshToken, 'a'), await makePost(fresh, freshToken, 'b'), await makePost(fresh, freshToken, 'c')];
      const client = await SseClient.connect(`${fresh.urls.baseUrl}/posts/stream`, { 'last-event-id': a!.id });
      const d = await makePost(fresh, freshToken, 'd');
      const events = await client.waitForEvents(3);
      client.close();
      expect(events.map((e) => e.id)).toEqual([b!.id, c!.id, d.id]);
    } finally {
      await fresh.stop();
    }
  });

  it('answers a Last-Event-ID that is not ours with a 400 problem before any stream starts', async () => {
    for (const headers of [{ 'last-event-id': 'abc' }, { 'last-event-id': '12-x' }]) {
      const response = await SseClient.open(stream, headers);
      expect(response).toBeInstanceOf(Response);
      const problem = (await (response as Response).json()) as Problem;
      expect((response as Response).status).toBe(400);
      expect(problem).toMatchObject({ code: 'invalid_request', type: `${app.urls.siteUrl}/problems/invalid-event-id` });
    }
    const query = (await SseClient.open(`${stream}?last_event_id=%3Cscript%3E`)) as Response;
    expect(query.status).toBe(400);
  });

  it('sends heartbeats while nothing happens', async () => {
    const client = await SseClient.connect(stream);
    await client.waitForComments(3, 2_000);
    client.close();
    expect(client.comments.filter((c) => c.includes('heartbeat')).length).toBeGreaterThanOrEqual(2);
  });

  it('cuts off a client that stops reading, and keeps serving one that reads', async () => {
    const reader = await SseClient.connect(stream);
    const before = await endedCount('slow_client');
    const url = new URL(stream);
    const slow: Socket = connect(Number(url.port), url.hostname);
    const received: Buffer[] = [];
    let closed = false;
    slow.on('data', (chunk: Buffer) => received.push(chunk));
    slow.on('close', () => (closed = true));
    slow.on('error', () => undefined);
    await new Promise((resolve) => slow.once('connect', resolve));
    slow.write(`GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAccept: text/event-stream\r\n\r\n`);
    await new Promise((resolve) => slow.once('data', resolve));
    slow.pause();
    // Long posts (500 emoji, 2,000 bytes) until the kernel's buffers (megabytes on loopback) and the
    // bound behind them are full. They are written straight to the room over its gRPC API, which
    // costs a fraction of the HTTP path: the feed fans them out all the same.
    const room = new RoomClient(`127.0.0.1:${app.roomPort}`);
    const agentId = await room.agent('filler', 'Grace Hopper');
    const text = '🦜'.repeat(500);
    let made = 0;
    while ((await endedCount('slow_client')) === before) {
      await Promise.all(Array.from({ length: 100 }, () => room.post(agentId, text)));
      made += 100;
      // Paced by delivery: the reader has each batch before the next is made, so the slow client is
      // offered every post too, rather than the feed falling behind the writes.
      await reader.waitForEvents(made, 20_000);
      if (made > 20_000) throw new Error('a client that never reads was never cut off');
    }
    room.close();
    const afterCut = await makePost(app, token, 'made after the slow client was cut off');
    made += 1;
    slow.resume();
    await new Promise<void>((resolve) => (closed ? resolve() : slow.once('close', () => resolve())));
    // It got what was already on its way, then the server closed its connection: nothing later.
    expect(Buffer.concat(received).toString('utf8')).not.toContain(afterCut.id);
    // The reader was not held back: every post reached it.
    const events = await reader.waitForEvents(made, 20_000);
    reader.close();
    expect(events.length).toBe(made);
  }, 60_000);
});

describe('live streams at shutdown', () => {
  it('ends open streams when the product stops, instead of waiting out the grace period', async () => {
    const app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), SHUTDOWN_GRACE_MS: '60000' });
    const client = await SseClient.connect(`${app.urls.baseUrl}/posts/stream`);
    // With the stream left open, stop() would wait the whole minute and this test would time out.
    await app.stop();
    await client.ended;
    expect(client.events).toHaveLength(0);
  }, 15_000);
});
