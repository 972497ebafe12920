import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The launcher as a child whose log is followed (pids, restarts), as the fault smoke test drives it.
import { type RunningCluster, sleep, startCluster, approvedAgent } from '@agentroom/testkit';

/** The burst of part 1, and how many of its direct messages are in flight at once. */
const BURST = 1_000;
const SENDERS = 6;
/** Kill delivery once this many of the burst's events have arrived: mid-delivery, the burst still being sent. */
const KILL_AFTER = 250;
/** The burst's endpoint answers after this long, so that the killed worker has attempts in flight. */
const BURST_DELAY_MS = 250;
/** Jobs the killed worker held are taken over after 30 s idle (CLAIM_IDLE_MS): bounded above that. */
const BURST_BOUND_MS = 90_000;
/**
 * Part 2's events: each fails once (or twice) before it is delivered, and 20 failures in a row
 * disable an endpoint (MAX_FAILURES_IN_A_ROW), so this stays well below 20.
 */
const RETRIED = 10;
/** Retries wait up to 5 s, then up to 30 s (full jitter): bounded well above that. */
const RETRY_BOUND_MS = 120_000;
/** How long Redis stays down in part 2. */
const REDIS_DOWN_MS = 2_000;

/** One POST the receiver got. */
interface Received {
  endpoint: string;
  webhookId: string;
  /** The direct message's id, from the verified body's `data.message.id` ('' when it did not verify). */
  eventId: string;
  verified: boolean;
  /** What the receiver answered. */
  status: number;
  at: number;
}

interface Endpoint {
  verifier?: Webhook;
  /** The status to answer (a 2xx, or a failure to have the delivery retried). */
  status: () => number;
  /** Time taken before answering, so that a killed worker has attempts in flight. */
  delayMs: number;
}

interface DeliveredEvent {
  type: string;
  data: { type: string; message?: { id: string; toAgentId: string } };
}

/** What the Standard Webhooks library reads: the three headers, as strings. */
function signatureHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  return {
    'webhook-id': String(headers['webhook-id']),
    'webhook-timestamp': String(headers['webhook-timestamp']),
    'webhook-signature': String(headers['webhook-signature']),
  };
}

/** An agent's own server on 127.0.0.1: each endpoint (a path) verifies every delivery with its secret and records it. */
class Receiver {
  readonly received: Received[] = [];
  readonly endpoints = new Map<string, Endpoint>();
  private readonly server: Server;
  origin = '';

  constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const path = req.url ?? '';
        const endpoint = this.endpoints.get(path);
        const body = Buffer.concat(chunks).toString('utf8');
        let eventId = '';
        let verified = false;
        try {
          const event = endpoint?.verifier?.verify(body, signatureHeaders(req.headers)) as DeliveredEvent | undefined;
          verified = event !== undefined;
          eventId = event?.type === 'direct_message' && event.data.type === 'direct_message' ? (event.data.message?.id ?? '') : '';
        } catch {
          verified = false;
        }
        const status = endpoint?.status() ?? 404;
        this.received.push({ endpoint: path, webhookId: String(req.headers['webhook-id']), eventId, verified, status, at: Date.now() });
        const answer = (): void => {
          res.writeHead(status).end();
        };
        if (endpoint && endpoint.delayMs > 0) setTimeout(answer, endpoint.delayMs);
        else answer();
      });
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.origin = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** What `path` received so far. */
  at(path: string): Received[] {
    return this.received.filter((r) => r.endpoint === path);
  }

  async close(): Promise<void> {
    const closed = new Promise((resolve) => this.server.close(resolve));
    this.server.closeAllConnections();
    await closed;
  }
}

/** Per event: the first moment it was answered 2xx, every webhook-id it came with, how many POSTs. */
function byEvent(received: Received[]): Map<string, { deliveredAt?: number; webhookIds: Set<string>; posts: number; statuses: number[] }> {
  const events = new Map<string, { deliveredAt?: number; webhookIds: Set<string>; posts: number; statuses: number[] }>();
  for (const r of received) {
    if (!r.verified) continue;
    let event = events.get(r.eventId);
    if (!event) events.set(r.eventId, (event = { webhookIds: new Set(), posts: 0, statuses: [] }));
    event.webhookIds.add(r.webhookId);
    event.posts += 1;
    event.statuses.push(r.status);
    if (r.status >= 200 && r.status < 300 && event.deliveredAt === undefined) event.deliveredAt = r.at;
  }
  return events;
}

/** Polls `check` every 100 ms until it holds or `timeoutMs` has passed; answers whether it held. */
async function within(timeoutMs: number, check: () => boolean): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
}

/** One short-lived connection to the test's Redis, to look at the delivery queue. */
async function inspect<T>(url: string, look: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await look(redis);
  } finally {
    redis.disconnect();
  }
}

/** The queue's jobs, read in one transaction: those in the stream (waiting or being attempted) and those scheduled for retry. */
async function queueDepth(url: string): Promise<{ queued: number; scheduled: number }> {
  const answers = await inspect(url, (r) => r.multi().xlen(QUEUE_STREAM).zcard(QUEUE_SCHEDULED).exec());
  const [queued, scheduled] = (answers ?? []).map(([error, value]) => {
    if (error) throw error;
    return Number(value);
  });
  return { queued: queued ?? -1, scheduled: scheduled ?? -1 };
}

/** Polls the queue until it is empty (stream and retry schedule), or `timeoutMs` has passed; answers when it was empty. */
async function untilDrained(url: string, timeoutMs: number, seen: (depth: { queued: number; scheduled: number }) => void): Promise<number | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const depth = await queueDepth(url);
    seen(depth);
    if (depth.queued === 0 && depth.scheduled === 0) return Date.now();
    if (Date.now() > deadline) return undefined;
    await sleep(250);
  }
}

/** The delivery queue's keys (services/delivery/src/store-redis.ts), under the default prefix `ar`. */
const QUEUE_STREAM = 'ar:delivery:{queue}:stream';
const QUEUE_SCHEDULED = 'ar:delivery:{queue}:scheduled';

/**
 * Webhooks are delivered at least once, on `npm run cluster` (every service its own process) over a
 * Redis with an append-only file: the delivery process killed with SIGKILL in the middle of a burst
 * of 1,000 events loses none of them (the launcher restarts it; the jobs its worker held are taken
 * over after their idle time), and a Redis stopped and started again while deliveries wait for
 * their retry loses none either. Every delivery is verified with the `standardwebhooks` package,
 * and a repeat carries the webhook-id of the first.
 */
describe('webhooks survive a killed delivery process and a Redis restart (cluster mode)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentroom-webhooks-durability-'));
  let redis: LocalRedis | undefined;
  let cluster: RunningCluster | undefined;
  const receiver = new Receiver();
  let sender: string;
  let base: string;

  const api = async (method: string, path: string, token: string, body?: unknown): Promise<Response> =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(10_000),
    });

  /** Registers `path` of the receiver as a webhook of the agent with `token`, and verifies its deliveries with the secret. */
  const register = async (token: string, path: string, endpoint: Omit<Endpoint, 'verifier'>): Promise<string> => {
    receiver.endpoints.set(path, endpoint);
    const created = await api('POST', '/webhooks', token, { url: `${receiver.origin}${path}`, events: ['direct_message'] });
    expect(created.status).toBe(201);
    const hook = (await created.json()) as { id: string; secret: string };
    expect(hook.secret).toMatch(/^whsec_/);
    receiver.endpoints.set(path, { ...endpoint, verifier: new Webhook(hook.secret) });
    return hook.id;
  };

  /** Sends one direct message from the sender to `to`; answers its id. */
  const send = async (to: string, text: string): Promise<string> => {
    const sent = await api('POST', '/messages', sender, { to, text });
    if (sent.status !== 201) throw new Error(`POST /messages answered ${sent.status}: ${await sent.text()}`);
    return ((await sent.json()) as { id: string }).id;
  };

  beforeAll(async () => {
    redis = await startRedisServer({ dir, appendfsync: 'everysec' });
    // One edge: seven processes on two cores besides the test's own.
    cluster = await startCluster({ REDIS_URL: redis.url, EDGE_REPLICAS: '1', WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' });
    base = `${cluster.origin}/api/v1`;
    await receiver.listen();
    sender = (await approvedAgent(cluster.origin, ['messages:write'], 'durable-sender')).token;
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
    await redis?.stop();
    await receiver.close();
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it(`delivers every one of ${BURST} events at least once when the delivery process is killed (SIGKILL) mid-burst, repeats under the same webhook-id`, async () => {
    const c = cluster as RunningCluster;
    const listener = await approvedAgent(c.origin, ['messages:read'], 'durable-listener');
    const path = '/burst';
    await register(listener.token, path, { status: () => 204, delayMs: BURST_DELAY_MS });

    const expected = new Set<string>();
    const started = Date.now();
    let next = 0;
    const sending = Promise.all(
      Array.from({ length: SENDERS }, async () => {
        while (next < BURST) {
          next += 1;
          expected.add(await send(listener.agentId, `burst ${next}`));
        }
      }),
    );

    // Mid-delivery, the burst still being sent: kill -9, as the kernel's OOM killer or a node loss would.
    const arrivedBeforeKill = await within(60_000, () => new Set(receiver.at(path).map((r) => r.eventId)).size >= KILL_AFTER);
    expect(arrivedBeforeKill, `${KILL_AFTER} events did not arrive within 60 s`).toBe(true);
    const restartsBefore = c.restarts('delivery');
    const killedPid = c.pid('delivery');
    const killedAt = Date.now();
    process.kill(killedPid, 'SIGKILL');
    const atKill = { sent: expected.size, arrived: new Set(receiver.at(path).map((r) => r.eventId)).size };
    const newPid = await c.restarted('delivery', restartsBefore, 20_000);
    expect(newPid).not.toBe(killedPid);
    expect(c.lines.join('\n')).toMatch(/delivery exited \(SIGKILL\) after [\d.]+ s; restarting it in [\d.]+ s/);
    // What the killed worker held: jobs read from the queue and never acked, to be taken over.
    const pending = await inspect(
      (redis as LocalRedis).url,
      async (r) => (await r.xpending(QUEUE_STREAM, 'workers')) as [number, string | null, string | null, [string, string][] | null],
    );

    await sending;
    const sentAt = Date.now();
    expect(expected.size).toBe(BURST);

    // Every event arrived, and the queue is empty: the jobs the killed worker held were taken over and done.
    let allArrivedAt: number | undefined;
    let drained = { queued: -1, scheduled: -1 };
    const allArrived = await within(BURST_BOUND_MS, () => {
      const events = byEvent(receiver.at(path));
      if (allArrivedAt === undefined && [...expected].every((id) => events.get(id)?.deliveredAt !== undefined)) allArrivedAt = Date.now();
      return allArrivedAt !== undefined;
    });
    const drainedAt = allArrived
      ? await untilDrained((redis as LocalRedis).url, BURST_BOUND_MS - (Date.now() - sentAt), (depth) => (drained = depth))
      : undefined;
    const received = receiver.at(path);
    const events = byEvent(received);
    const missing = [...expected].filter((id) => events.get(id)?.deliveredAt === undefined);
    const lastArrival = Math.max(...[...expected].map((id) => events.get(id)?.deliveredAt ?? Date.now()));
    const repeats = received.length - events.size;
    const repeatedEvents = [...events.values()].filter((e) => e.posts > 1).length;
    const postsPerEvent = new Map<number, number>();
    for (const e of events.values()) postsPerEvent.set(e.posts, (postsPerEvent.get(e.posts) ?? 0) + 1);
    const histogram = [...postsPerEvent]
      .sort(([a], [b]) => a - b)
      .map(([posts, count]) => `${count} × ${posts}`)
      .join(', ');
    // Events sent after the kill wait for the new process, and for the killed one's lease to lapse.
    const firstAfterKill = Math.min(...received.filter((r) => r.at > killedAt).map((r) => r.at));
    const since = (at: number | undefined, from: number): string => (at === undefined ? 'never' : `${((at - from) / 1000).toFixed(1)} s`);
    console.log(
      [
        `webhooks durability, burst: ${BURST} direct messages sent in ${((sentAt - started) / 1000).toFixed(1)} s (${SENDERS} at a time); the receiver answers 204 after ${BURST_DELAY_MS} ms`,
        `  delivery (pid ${killedPid}) killed with SIGKILL ${((killedAt - started) / 1000).toFixed(1)} s in, after ${atKill.sent} sent and ${atKill.arrived} arrived; restarted as pid ${newPid}; the next POST came ${since(firstAfterKill, killedAt)} after the kill`,
        `  jobs held unacked in the queue's group just after the kill: ${pending[0]} (${(pending[3] ?? []).map(([consumer, count]) => `${count} by ${consumer}`).join(', ') || 'none'})`,
        `  all ${BURST} arrived ${since(lastArrival, started)} after the first was sent, ${since(lastArrival, killedAt)} after the kill, ${since(lastArrival, sentAt)} after the last was sent; queue empty ${since(drainedAt, killedAt)} after the kill (left: ${drained.queued} queued, ${drained.scheduled} scheduled)`,
        `  POSTs received: ${received.length}; repeats: ${repeats} (of ${repeatedEvents} events; events × POSTs: ${histogram}), each with its event's webhook-id; missing: ${missing.length}; failing verification: ${received.filter((r) => !r.verified).length}`,
      ].join('\n'),
    );

    expect(
      allArrived,
      `not every event arrived within ${BURST_BOUND_MS / 1000} s after the burst; missing ${missing.length}: ${missing.slice(0, 5).join(', ')}`,
    ).toBe(true);
    expect(missing).toEqual([]);
    // Every POST verified with the endpoint's secret, and carried one of the burst's events, no other.
    expect(received.filter((r) => !r.verified)).toEqual([]);
    expect([...events.keys()].filter((id) => !expected.has(id))).toEqual([]);
    // One webhook-id per event, and no two events under one webhook-id: a receiver can drop repeats by it.
    expect([...events.values()].filter((e) => e.webhookIds.size !== 1)).toEqual([]);
    expect(new Set([...events.values()].flatMap((e) => [...e.webhookIds])).size).toBe(BURST);
    // Nothing left behind: the jobs of the killed worker were taken over (after their idle time) and acked.
    expect(drainedAt, `the queue still holds ${drained.queued} queued and ${drained.scheduled} scheduled jobs`).toBeDefined();
  }, 200_000);

  it(`loses none of ${RETRIED} deliveries waiting for their retry when Redis (append-only file) is stopped and started again`, async () => {
    const c = cluster as RunningCluster;
    const listener = await approvedAgent(c.origin, ['messages:read'], 'durable-retried');
    const path = '/flaky';
    // The endpoint fails (500) until Redis is stopped, then accepts: every delivery waits for a retry across the restart.
    let failing = true;
    await register(listener.token, path, { status: () => (failing ? 500 : 204), delayMs: 0 });

    const expected = new Set<string>();
    await Promise.all(Array.from({ length: RETRIED }, async (_, i) => expected.add(await send(listener.agentId, `retried ${i + 1}`))));
    const failedOnce = await within(30_000, () => {
      const events = byEvent(receiver.at(path));
      return [...expected].every((id) => (events.get(id)?.statuses.length ?? 0) >= 1);
    });
    expect(failedOnce, 'not every event had its first (failed) attempt within 30 s').toBe(true);

    const local = redis as LocalRedis;
    const waiting = await queueDepth(local.url);
    const port = local.port;
    const stoppedAt = Date.now();
    await local.stop(); // SIGTERM: the append-only file is flushed; the folder is ours and stays
    failing = false;
    const deliveredBeforeStop = [...byEvent(receiver.at(path)).values()].filter((e) => e.deliveredAt !== undefined && e.deliveredAt < stoppedAt).length;
    const attemptsBeforeStop = receiver.at(path).filter((r) => r.at < stoppedAt).length;
    await sleep(REDIS_DOWN_MS);
    redis = await startRedisServer({ port, dir, appendfsync: 'everysec' });
    const restartedAt = Date.now();

    const allArrived = await within(RETRY_BOUND_MS, () => {
      const events = byEvent(receiver.at(path));
      return [...expected].every((id) => events.get(id)?.deliveredAt !== undefined);
    });
    const received = receiver.at(path);
    const events = byEvent(received);
    const missing = [...expected].filter((id) => events.get(id)?.deliveredAt === undefined);
    const lastArrival = Math.max(...[...expected].map((id) => events.get(id)?.deliveredAt ?? Date.now()));
    console.log(
      [
        `webhooks durability, Redis restart: ${RETRIED} direct messages to an endpoint answering 500; ${attemptsBeforeStop} failed attempts, ${deliveredBeforeStop} delivered, before Redis was stopped`,
        `  in the queue when Redis was stopped: ${waiting.queued} queued, ${waiting.scheduled} scheduled for retry`,
        `  Redis down ${((restartedAt - stoppedAt) / 1000).toFixed(1)} s; all ${RETRIED} delivered ${((lastArrival - restartedAt) / 1000).toFixed(1)} s after it was started again`,
        `  POSTs received: ${received.length} (attempts per event: ${[...events.values()].map((e) => e.posts).join(' ')}); missing: ${missing.length}; failing verification: ${received.filter((r) => !r.verified).length}`,
      ].join('\n'),
    );

    expect(deliveredBeforeStop).toBe(0);
    // Every job waited in Redis (the stream or the retry schedule), and only there, when it stopped.
    expect(waiting.queued + waiting.scheduled).toBe(RETRIED);
    expect(allArrived, `not every event was delivered within ${RETRY_BOUND_MS / 1000} s after Redis was started again; missing ${missing.join(', ')}`).toBe(
      true,
    );
    expect(received.filter((r) => !r.verified)).toEqual([]);
    expect([...events.keys()].filter((id) => !expected.has(id))).toEqual([]);
    expect([...events.values()].filter((e) => e.webhookIds.size !== 1)).toEqual([]);
    expect(new Set([...events.values()].flatMap((e) => [...e.webhookIds])).size).toBe(RETRIED);
  }, 170_000);
});
