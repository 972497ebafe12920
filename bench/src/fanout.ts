// SSE fan-out: many subscribers of GET {base_url}/posts/stream on one edge process, one post, and
// the time until each subscriber has parsed it. Subscribers are plain node:http connections (one
// socket each, no pooling) parsed by eventsource-parser, as an agent without a browser would.
import { spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { createParser } from 'eventsource-parser';

const STREAM_PATH = '/api/v1/posts/stream';
/** Subscribers opened at once while connecting; more only makes the edge's accept queue overflow. */
const CONNECT_BATCH = 250;
/** How long a round waits for the last subscriber before it counts the rest as missing. */
const ROUND_TIMEOUT_MS = 15_000;

interface Subscriber {
  /** Ids this subscriber has seen, and when its bytes arrived (performance.now()). */
  seen: Map<string, number>;
  duplicates: number;
  /** Parses what arrived since the last call; events take the arrival time of their bytes. */
  flush(): void;
  close(): void;
}

/** Chunks received by all subscribers; the wait for a round watches it instead of parsing. */
let chunksReceived = 0;

export interface FanoutRound {
  /** Milliseconds from sending the POST to each subscriber having the event, sorted. */
  latencies: number[];
  missing: number;
  duplicates: number;
}

export interface FanoutResult {
  subscribers: number;
  connectSeconds: number;
  /** The edge process's RSS, idle before connecting, then with everyone connected, then after the rounds. */
  rssMiB: { idle: number; connected: number; after: number };
  /** The edge's own time to write one post to every subscriber, averaged over the measured rounds (its agentroom_live_fanout_seconds). */
  edgeFanoutMs: number;
  rounds: FanoutRound[];
}

export interface FanoutOptions {
  /** The edge process the subscribers connect to (no router in between). */
  edgeOrigin: string;
  /** Its Prometheus `/metrics` (the RSS and the subscriber count are read there). */
  edgeMetrics: string;
  /** Where the post is made: the router, as an agent would. */
  routerOrigin: string;
  token: string;
  subscribers: number;
  rounds: number;
  progress(line: string): void;
  /** Called as the measured rounds start (after the warm-up round) and once they end: to count CPU time over them alone. */
  measuredRounds?: { start(): void; end(): void };
}

/** The soft limit on open files of this process (and so of the servers it started). */
export function openFilesLimit(): number {
  const answer = spawnSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' });
  const value = answer.stdout.trim();
  return value === 'unlimited' ? Number.POSITIVE_INFINITY : Number(value);
}

/**
 * One subscriber. Its socket handler only timestamps and keeps the bytes; parsing waits for
 * `flush`, so the time measured is when the bytes reached this process, not when a busy parser
 * got to them behind thousands of other sockets.
 */
function subscribe(origin: string): Promise<Subscriber> {
  const url = new URL(STREAM_PATH, origin);
  return new Promise((resolve, reject) => {
    const seen = new Map<string, number>();
    const pending: { at: number; chunk: Buffer }[] = [];
    const decoder = new TextDecoder();
    let arrivedAt = 0;
    const parser = createParser({
      onEvent: (event) => {
        if (event.event !== 'post' || event.id === undefined) return;
        if (seen.has(event.id)) subscriber.duplicates += 1;
        else seen.set(event.id, arrivedAt);
      },
    });
    const subscriber: Subscriber = {
      seen,
      duplicates: 0,
      flush() {
        for (const { at, chunk } of pending) {
          arrivedAt = at;
          parser.feed(decoder.decode(chunk, { stream: true }));
        }
        pending.length = 0;
      },
      close: () => req.destroy(),
    };
    const req = request(url, { agent: false, headers: { accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`GET ${url.href} answered ${res.statusCode}`));
        res.resume();
        return;
      }
      // The stream's first bytes (`retry:` and a comment) say the subscription is in place.
      res.once('data', () => resolve(subscriber));
      res.on('data', (chunk: Buffer) => {
        pending.push({ at: performance.now(), chunk });
        chunksReceived += 1;
      });
      res.on('error', () => undefined);
    });
    req.on('error', reject);
    req.end();
  });
}

/** One sample of the edge's Prometheus text, by its full name with labels (`name{label="v"}`). */
async function edgeMetric(metrics: string, name: string): Promise<number> {
  const text = await (await fetch(metrics)).text();
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `));
  if (line === undefined) throw new Error(`${metrics} has no ${name}`);
  return Number(line.slice(name.length + 1));
}

async function edgeRssMiB(metrics: string): Promise<number> {
  return (await edgeMetric(metrics, 'process_resident_memory_bytes')) / 2 ** 20;
}

async function liveSubscribers(metrics: string): Promise<number> {
  return edgeMetric(metrics, 'agentroom_live_subscribers{feed="posts"}').catch(() => 0);
}

/** The edge's fan-out histogram so far: total seconds and posts. */
async function fanoutSoFar(metrics: string): Promise<{ seconds: number; posts: number }> {
  return { seconds: await edgeMetric(metrics, 'agentroom_live_fanout_seconds_sum'), posts: await edgeMetric(metrics, 'agentroom_live_fanout_seconds_count') };
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export async function fanout(options: FanoutOptions): Promise<FanoutResult> {
  const { edgeOrigin, edgeMetrics, subscribers: count } = options;
  // Subscribers of an earlier size may still be leaving: wait for the edge to have none.
  for (let i = 0; i < 100 && (await liveSubscribers(edgeMetrics)) > 0; i += 1) await pause(100);
  const idle = await edgeRssMiB(edgeMetrics);
  const subscribers: Subscriber[] = [];
  try {
    const started = performance.now();
    while (subscribers.length < count) {
      const batch = Math.min(CONNECT_BATCH, count - subscribers.length);
      subscribers.push(...(await Promise.all(Array.from({ length: batch }, () => subscribe(edgeOrigin)))));
      if (subscribers.length % 2_000 === 0 || subscribers.length === count)
        options.progress(`    ${subscribers.length.toLocaleString('en-US')} subscribers connected`);
    }
    const connectSeconds = (performance.now() - started) / 1_000;
    const connected = await edgeRssMiB(edgeMetrics);

    const rounds: FanoutRound[] = [];
    let fanoutBefore = { seconds: 0, posts: 0 };
    // One more round than measured: the first warms up the JIT and the buffers of both sides.
    for (let round = 0; round <= options.rounds; round += 1) {
      if (round === 1) options.measuredRounds?.start();
      for (const subscriber of subscribers) subscriber.flush();
      const before = chunksReceived;
      const sent = performance.now();
      const response = await fetch(`${options.routerOrigin}/api/v1/posts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${options.token}` },
        body: JSON.stringify({ text: `fan-out round ${round} to ${count} subscribers` }),
      });
      if (response.status !== 201) throw new Error(`POST /api/v1/posts answered ${response.status}: ${await response.text()}`);
      const { id } = (await response.json()) as { id: string };
      const deadline = performance.now() + ROUND_TIMEOUT_MS;
      const arrived = (): number => {
        for (const subscriber of subscribers) subscriber.flush();
        return subscribers.filter((s) => s.seen.has(id)).length;
      };
      // Every subscriber needs at least one chunk; only then is parsing worth it.
      while (performance.now() < deadline && (chunksReceived - before < count || arrived() < count)) await pause(5);
      arrived();
      const latencies = subscribers.flatMap((s) => {
        const at = s.seen.get(id);
        return at === undefined ? [] : [at - sent];
      });
      latencies.sort((a, b) => a - b);
      const label = round === 0 ? 'warm-up round (not counted)' : `round ${round}`;
      options.progress(`    ${label}: ${latencies.length.toLocaleString('en-US')} of ${count.toLocaleString('en-US')} have the post`);
      if (round === 0) fanoutBefore = await fanoutSoFar(edgeMetrics);
      if (round > 0) rounds.push({ latencies, missing: count - latencies.length, duplicates: subscribers.reduce((sum, s) => sum + s.duplicates, 0) });
      // A short pause, so each round starts from a quiet edge.
      await pause(300);
    }
    options.measuredRounds?.end();
    const fanoutAfter = await fanoutSoFar(edgeMetrics);
    const edgeFanoutMs = ((fanoutAfter.seconds - fanoutBefore.seconds) / Math.max(1, fanoutAfter.posts - fanoutBefore.posts)) * 1_000;
    return { subscribers: count, connectSeconds, rssMiB: { idle, connected, after: await edgeRssMiB(edgeMetrics) }, edgeFanoutMs, rounds };
  } finally {
    for (const subscriber of subscribers) subscriber.close();
  }
}
