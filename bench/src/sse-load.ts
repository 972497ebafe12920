// `npm run load:sse -- …`: live-feed fan-out under load, against any deployment (BASE_URL). N subscribers
// on the posts feed and M on inboxes (tokens from the file `npm run agents -- provision` writes), a
// writer posting and sending at a steady rate, and, mid-run, a share of the connections cut on purpose:
// they come back with Last-Event-ID, as EventSource does, and must miss nothing. It reports delivery
// latency percentiles per feed, missing and duplicate deliveries, and reconnects; a table on stdout
// and the whole result as JSON in load-tests/reports/. k6 has no SSE client, hence this script.
//
// Subscribers are plain node:http(s) connections, one socket each, parsed by eventsource-parser as in
// the fan-out bench (fanout.ts): bytes are timestamped when they arrive and parsed a little later, so
// the latency measured is the network's and the server's, not this process's parser queue.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { type ClientRequest, type IncomingMessage, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { createParser, type EventSourceParser } from 'eventsource-parser';
import { z } from 'zod';
import { percentile } from './stats.js';

const SCOPES = ['agents:read', 'posts:write', 'messages:read', 'messages:write'] as const;
/** Connections opened at once while subscribing; more only overflows the server's accept queue. */
const CONNECT_BATCH = 200;
/** How often arrived bytes are parsed. */
const FLUSH_MS = 100;
/** Writes in flight at most; past that, the writer is falling behind and says so. */
const MAX_IN_FLIGHT = 256;

/** The file `npm run agents -- provision` writes (its format is fixed: k6 scripts read it too). */
const tokensFile = z.object({
  auth: z.string(),
  human: z.string(),
  createdAt: z.string(),
  agents: z.array(z.object({ id: z.string().min(1), name: z.string(), token: z.string().startsWith('agt_'), scopes: z.array(z.enum(SCOPES)) })).min(1),
});
type Agent = z.output<typeof tokensFile>['agents'][number];

/** What comes back from POST /posts and POST /messages: only the id is needed. */
const created = z.object({ id: z.string().min(1) });

const USAGE =
  'BASE_URL=<site url> npm run load:sse -- [--tokens FILE] [--posts N] [--inboxes M] [--duration S] [--rate R] [--message-rate R] [--kill-share F] [--drain S] [--posts-with-tokens] [--report-dir DIR]';

class UsageError extends Error {}

export interface SseLoadOptions {
  /** The deployment's site address, e.g. http://localhost:8080. */
  baseUrl: string;
  /** `{api_url}/v1`: BASE_URL/api/v1 unless API_URL says otherwise. */
  restUrl: string;
  tokens: string;
  posts: number;
  inboxes: number;
  durationS: number;
  /** Posts per second. */
  rate: number;
  /** Messages per second. */
  messageRate: number;
  /** Share of every feed's connections cut mid-run, 0 to 1. */
  killShare: number;
  /** Seconds to wait, after the writer stops, for deliveries still on their way. */
  drainS: number;
  postsWithTokens: boolean;
  reportDir: string;
}

function number(flag: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isFinite(parsed) || parsed < min || parsed > max)
    throw new UsageError(`--${flag} must be a number from ${min} to ${max}, not ${JSON.stringify(value)}`);
  return parsed;
}

const FLAGS = {
  'base-url': { type: 'string' },
  tokens: { type: 'string' },
  posts: { type: 'string' },
  inboxes: { type: 'string' },
  duration: { type: 'string' },
  rate: { type: 'string' },
  'message-rate': { type: 'string' },
  'kill-share': { type: 'string' },
  drain: { type: 'string' },
  'posts-with-tokens': { type: 'boolean' },
  'report-dir': { type: 'string' },
} as const;

function flagsOf(argv: string[]): ReturnType<typeof parseArgs<{ args: string[]; options: typeof FLAGS; strict: true; allowPositionals: false }>>['values'] {
  try {
    return parseArgs({ args: argv, options: FLAGS, strict: true, allowPositionals: false }).values;
  } catch (error) {
    // node:util's own words ("Unknown option '--x'"), up to their first full stop.
    throw new UsageError((error as Error).message.split('. ')[0] ?? 'bad arguments');
  }
}

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv): SseLoadOptions {
  const values = flagsOf(argv);
  const base = values['base-url'] ?? env.BASE_URL;
  if (base === undefined || base === '')
    throw new UsageError('BASE_URL is not set: point it at the deployment, e.g. BASE_URL=http://localhost:8080 (or pass --base-url)');
  let baseUrl: string;
  let restUrl: string;
  try {
    baseUrl = new URL(base).href.replace(/\/+$/, '');
    restUrl = `${new URL(env.API_URL || `${baseUrl}/api`).href.replace(/\/+$/, '')}/v1`;
  } catch {
    throw new UsageError(`BASE_URL (and API_URL, when set) must be absolute http(s) URLs, not ${JSON.stringify(base)}`);
  }
  if (!/^https?:/.test(baseUrl) || !/^https?:/.test(restUrl)) throw new UsageError('BASE_URL and API_URL must be http or https URLs');
  const durationS = number('duration', values.duration, 20, 1, 86_400);
  return {
    baseUrl,
    restUrl,
    tokens: values.tokens ?? (env.TOKENS || join('load-tests', 'tokens.json')),
    posts: number('posts', values.posts, 100, 0, 200_000),
    inboxes: number('inboxes', values.inboxes, 10, 0, 200_000),
    durationS,
    rate: number('rate', values.rate, 5, 0, 10_000),
    messageRate: number('message-rate', values['message-rate'], 5, 0, 10_000),
    killShare: number('kill-share', values['kill-share'], 0.2, 0, 1),
    drainS: number('drain', values.drain, 10, 0, 600),
    postsWithTokens: values['posts-with-tokens'] ?? false,
    reportDir: values['report-dir'] ?? (env.REPORTS_DIR || join('load-tests', 'reports')),
  };
}

type Feed = 'posts' | 'messages';

/** When one connection of a subscriber opened (performance.now()): deliveries on it sent before that came by Last-Event-ID. */
interface Arrival {
  at: number;
  /** Which connection of the subscriber it came on: 0 the first, then one more per reconnect. */
  connection: number;
}

/**
 * One subscriber of a feed, across its reconnects. Its socket handler only timestamps and keeps the
 * bytes; `flush` parses them. A cut connection (by us, or ended by the server) comes back with the id
 * of the last event it parsed as Last-Event-ID.
 */
class Subscriber {
  /**
   * Every event id parsed, with its first arrival. Whether an id is ours is decided at the end: an
   * event often arrives before the answer to the write that made it has told the writer its id.
   */
  readonly seen = new Map<string, Arrival>();
  /** Ids that arrived more than once, with how many extra times. */
  readonly repeats = new Map<string, number>();
  /** Set once every event it should have is in `seen` (it cannot become incomplete again). */
  complete = false;
  killed = 0;
  serverEnded = 0;
  failedConnects = 0;
  /** performance.now() when each connection's stream opened. */
  readonly openedAt: number[] = [];
  /** The Last-Event-ID each connection was opened with ('' for none). */
  readonly resumedAfter: string[] = [];
  private lastId: string | undefined;
  private retryMs = 2_000;
  private req: ClientRequest | undefined;
  private pending: { at: number; chunk: Buffer; connection: number }[] = [];
  private parser: EventSourceParser;
  private decoder = new TextDecoder();
  private arrival: Arrival = { at: 0, connection: 0 };
  private closing = false;

  constructor(
    readonly feed: Feed,
    private readonly url: URL,
    private readonly token: string | undefined,
    /** The agent whose inbox this is (messages only). */
    readonly agentId: string | undefined,
  ) {
    this.parser = this.newParser();
  }

  private newParser(): EventSourceParser {
    return createParser({
      onEvent: (event) => {
        if (event.id === undefined || (event.event !== 'post' && event.event !== 'message')) return;
        this.lastId = event.id;
        if (this.seen.has(event.id)) this.repeats.set(event.id, (this.repeats.get(event.id) ?? 0) + 1);
        else this.seen.set(event.id, this.arrival);
      },
      onRetry: (ms) => {
        this.retryMs = ms;
      },
    });
  }

  /** Opens a connection; resolves once the stream's first bytes say it is subscribed. */
  connect(): Promise<void> {
    const connection = this.openedAt.length;
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    if (this.lastId !== undefined) headers['last-event-id'] = this.lastId;
    const request = this.url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const req = request(this.url, { agent: false, headers }, (res: IncomingMessage) => {
        if (res.statusCode !== 200) {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk.slice(0, 500)));
          res.on('end', () => reject(new Error(`GET ${this.url.href} answered ${res.statusCode}: ${body.slice(0, 300)}`)));
          return;
        }
        res.once('data', () => {
          this.openedAt[connection] = performance.now();
          this.resumedAfter[connection] = headers['last-event-id'] ?? '';
          resolve();
        });
        res.on('data', (chunk: Buffer) => this.pending.push({ at: performance.now(), chunk, connection }));
        res.on('error', () => undefined);
        // The server ended the stream (a rollout, a slow client): come back as EventSource would.
        res.on('close', () => {
          if (this.req !== req || this.closing) return;
          this.serverEnded += 1;
          this.comeBack(this.retryMs);
        });
      });
      // Before the stream opened, a failed connection; after, the response's 'close' deals with it.
      req.on('error', reject);
      this.req = req;
      req.end();
    });
  }

  /** Reconnects after `delayMs`, retrying a refused connection every second a few times. */
  private comeBack(delayMs: number): void {
    this.flush();
    // A fresh parser: a half-received event of the cut connection must not run into the next one's bytes.
    this.parser = this.newParser();
    this.decoder = new TextDecoder();
    this.req = undefined;
    setTimeout(() => {
      if (this.closing) return;
      this.connect().catch(() => {
        this.failedConnects += 1;
        if (this.failedConnects <= 30) this.comeBack(1_000);
      });
    }, delayMs);
  }

  /** Whether a cut would come back with a Last-Event-ID: only after an event has arrived. */
  canResume(): boolean {
    this.flush();
    return this.req !== undefined && this.lastId !== undefined;
  }

  /** Cuts the connection on purpose, as a network would; it comes back after `delayMs`. */
  kill(delayMs: number): void {
    const req = this.req;
    if (!req) return;
    this.killed += 1;
    this.flush();
    this.req = undefined;
    req.destroy();
    this.comeBack(delayMs);
  }

  flush(): void {
    for (const { at, chunk, connection } of this.pending) {
      this.arrival = { at, connection };
      this.parser.feed(this.decoder.decode(chunk, { stream: true }));
    }
    this.pending = [];
  }

  close(): void {
    this.closing = true;
    this.flush();
    this.req?.destroy();
  }
}

/** When the write that made an event went out (performance.now()). */
interface Sent {
  at: number;
}

interface WriterStats {
  attempted: number;
  created: number;
  /** Failed answers by HTTP status (or "network"). */
  failed: Record<string, number>;
  /** Writes not even tried: too many still in flight. */
  skipped: number;
}

interface FeedReport {
  subscribers: number;
  /** Distinct events the writer made on this feed. */
  events: number;
  /** Deliveries that should have happened (one per subscriber per event it should see). */
  expected: number;
  delivered: number;
  missing: number;
  duplicates: number;
  /** Deliveries that came back through Last-Event-ID after a cut (not in the latency figures). */
  recovered: number;
  killed: number;
  serverEnded: number;
  failedReconnects: number;
  /** Events of other writers seen on the feed, ignored. */
  others: number;
  /** Up to 20 missing deliveries, to start an investigation from: which stream, which event, and the stream's connections (ms since the run began). */
  missingSamples: {
    subscriber: number;
    agentId?: string;
    id: string;
    sentAtMs: number;
    openedAtMs: number[];
    resumedAfter: string[];
    cut: number;
    serverEnded: number;
  }[];
  /** Milliseconds from the write going out to the subscriber having the event, live deliveries only. */
  latencyMs: { p50: number; p95: number; p99: number; max: number } | null;
  writer: WriterStats;
}

const pause = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

function withScope(agents: Agent[], scope: (typeof SCOPES)[number]): Agent[] {
  return agents.filter((agent) => agent.scopes.includes(scope));
}

async function loadTokens(path: string): Promise<Agent[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    throw new UsageError(`cannot read ${path}: make it with npm run agents -- provision … --out ${path} (load-tests/README.md, "Tokens"), or pass --tokens`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new UsageError(`${path} is not JSON; it should be the file npm run agents -- provision writes`);
  }
  const parsed = tokensFile.safeParse(json);
  if (!parsed.success)
    throw new UsageError(`${path} is not a tokens file of npm run agents -- provision (${parsed.error.issues[0]?.message ?? 'wrong shape'})`);
  return parsed.data.agents;
}

/** Opens every subscriber, CONNECT_BATCH at a time; the first failure stops the run. */
async function connectAll(subscribers: Subscriber[], progress: (line: string) => void): Promise<void> {
  for (let i = 0; i < subscribers.length; i += CONNECT_BATCH) {
    await Promise.all(subscribers.slice(i, i + CONNECT_BATCH).map((s) => s.connect()));
    const done = Math.min(i + CONNECT_BATCH, subscribers.length);
    if (done % 2_000 === 0 || done === subscribers.length)
      progress(`  ${done.toLocaleString('en-US')} of ${subscribers.length.toLocaleString('en-US')} streams open`);
  }
}

/** A steady writer: `rate` writes a second for `durationMs`, at most MAX_IN_FLIGHT at once. */
async function write(rate: number, durationMs: number, once: (n: number) => Promise<void>, stats: WriterStats): Promise<void> {
  if (rate <= 0) return;
  const started = performance.now();
  const inFlight = new Set<Promise<void>>();
  let issued = 0;
  while (performance.now() - started < durationMs) {
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    while (issued < due) {
      issued += 1;
      if (inFlight.size >= MAX_IN_FLIGHT) {
        stats.skipped += 1;
        continue;
      }
      stats.attempted += 1;
      const write = once(issued).finally(() => inFlight.delete(write));
      inFlight.add(write);
    }
    await pause(Math.max(1, Math.min(20, 1000 / rate / 2)));
  }
  await Promise.all(inFlight);
}

async function postJson(url: string, token: string, body: unknown, stats: WriterStats): Promise<string | undefined> {
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (response.status !== 201) {
      stats.failed[String(response.status)] = (stats.failed[String(response.status)] ?? 0) + 1;
      await response.body?.cancel();
      return undefined;
    }
    const made = created.safeParse(await response.json());
    if (!made.success) {
      stats.failed.unreadable = (stats.failed.unreadable ?? 0) + 1;
      return undefined;
    }
    stats.created += 1;
    return made.data.id;
  } catch {
    stats.failed.network = (stats.failed.network ?? 0) + 1;
    return undefined;
  }
}

/** Ids of a feed's events (unique within the feed: posts room-wide, messages within one inbox), with when each write went out. */
type Written = Map<string, Sent>;

/** `expected` says, for a subscriber, the events it should have had: every post, or every message to its inbox. */
function report(subscribers: Subscriber[], expectedOf: (s: Subscriber) => Written, events: number, writer: WriterStats, runStart: number): FeedReport {
  const latencies: number[] = [];
  const missingSamples: FeedReport['missingSamples'] = [];
  const since = (at: number): number => Math.round(at - runStart);
  let expected = 0;
  let delivered = 0;
  let recovered = 0;
  let duplicates = 0;
  let others = 0;
  for (const subscriber of subscribers) {
    const mine = expectedOf(subscriber);
    for (const [id, write] of mine) {
      expected += 1;
      duplicates += subscriber.repeats.get(id) ?? 0;
      const arrival = subscriber.seen.get(id);
      if (!arrival) {
        if (missingSamples.length < 20) {
          missingSamples.push({
            subscriber: subscribers.indexOf(subscriber),
            ...(subscriber.agentId === undefined ? {} : { agentId: subscriber.agentId }),
            id,
            sentAtMs: since(write.at),
            openedAtMs: subscriber.openedAt.map(since),
            resumedAfter: subscriber.resumedAfter,
            cut: subscriber.killed,
            serverEnded: subscriber.serverEnded,
          });
        }
        continue;
      }
      delivered += 1;
      // Sent before the connection it came on was open: it came by Last-Event-ID, after a cut.
      if (arrival.connection > 0 && write.at < (subscriber.openedAt[arrival.connection] ?? 0)) recovered += 1;
      else latencies.push(arrival.at - write.at);
    }
    for (const id of subscriber.seen.keys()) if (!mine.has(id)) others += 1;
  }
  latencies.sort((a, b) => a - b);
  const round = (ms: number): number => Math.round(ms * 10) / 10;
  const sum = (pick: (s: Subscriber) => number): number => subscribers.reduce((total, s) => total + pick(s), 0);
  return {
    subscribers: subscribers.length,
    events,
    expected,
    delivered,
    missing: expected - delivered,
    duplicates,
    recovered,
    killed: sum((s) => s.killed),
    serverEnded: sum((s) => s.serverEnded),
    failedReconnects: sum((s) => s.failedConnects),
    others,
    missingSamples,
    latencyMs:
      latencies.length === 0
        ? null
        : {
            p50: round(percentile(latencies, 50)),
            p95: round(percentile(latencies, 95)),
            p99: round(percentile(latencies, 99)),
            max: round(latencies[latencies.length - 1] ?? 0),
          },
    writer,
  };
}

function table(feeds: Partial<Record<Feed, FeedReport>>): string {
  const header = [
    'feed',
    'subs',
    'events',
    'delivered',
    'missing',
    'dupes',
    'cut',
    'server-ended',
    'recovered',
    'p50 ms',
    'p95 ms',
    'p99 ms',
    'max ms',
    'writes ok/failed',
  ];
  const rows = Object.entries(feeds).map(([feed, r]) =>
    [
      feed,
      r.subscribers,
      r.events,
      `${r.delivered}/${r.expected}`,
      r.missing,
      r.duplicates,
      r.killed,
      r.serverEnded,
      r.recovered,
      r.latencyMs?.p50 ?? '-',
      r.latencyMs?.p95 ?? '-',
      r.latencyMs?.p99 ?? '-',
      r.latencyMs?.max ?? '-',
      `${r.writer.created}/${Object.values(r.writer.failed).reduce((a, b) => a + b, 0) + r.writer.skipped}`,
    ].map(String),
  );
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]): string => cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export interface SseLoadResult {
  ok: boolean;
  reportPath: string;
  feeds: Partial<Record<Feed, FeedReport>>;
}

export async function sseLoad(options: SseLoadOptions, progress: (line: string) => void): Promise<SseLoadResult> {
  const agents = await loadTokens(options.tokens);
  const posters = withScope(agents, 'posts:write');
  const senders = withScope(agents, 'messages:write');
  const readers = withScope(agents, 'messages:read');
  if (options.rate > 0 && posters.length === 0)
    throw new UsageError(`${options.tokens} has no agent with posts:write to post with; provision with --scopes posts:write,… or pass --rate 0`);
  if (options.inboxes > 0 && readers.length === 0)
    throw new UsageError(`${options.tokens} has no agent with messages:read for the inboxes; provision with --scopes messages:read,… or pass --inboxes 0`);
  if (options.inboxes > 0 && options.messageRate > 0 && senders.length === 0)
    throw new UsageError(`${options.tokens} has no agent with messages:write to send with; provision with --scopes messages:write,… or pass --message-rate 0`);

  const posts: Written = new Map();
  /** By recipient: message ids are unique only within one inbox. */
  const messages = new Map<string, Written>();
  const inbox = (agentId: string | undefined): Written => messages.get(agentId ?? '') ?? new Map();
  const messageCount = (): number => [...messages.values()].reduce((sum, m) => sum + m.size, 0);
  const postsUrl = new URL(`${options.restUrl}/posts/stream`);
  const inboxUrl = new URL(`${options.restUrl}/messages/stream`);
  const postSubscribers = Array.from(
    { length: options.posts },
    (_, i) => new Subscriber('posts', postsUrl, options.postsWithTokens ? agents[i % agents.length]?.token : undefined, undefined),
  );
  // M connections over the readers' inboxes: with more connections than readers, several watch one inbox.
  const inboxSubscribers = Array.from({ length: options.inboxes }, (_, i) => {
    const reader = readers[i % readers.length]!;
    return new Subscriber('messages', inboxUrl, reader.token, reader.id);
  });
  const recipients = readers.slice(0, Math.min(options.inboxes, readers.length));
  const all = [...postSubscribers, ...inboxSubscribers];

  const runStart = performance.now();
  const flusher = setInterval(() => {
    for (const subscriber of all) subscriber.flush();
  }, FLUSH_MS);
  const stats = (): WriterStats => ({ attempted: 0, created: 0, failed: {}, skipped: 0 });
  const postStats = stats();
  const messageStats = stats();
  try {
    progress(`sse-load: opening ${options.posts} posts stream(s) and ${options.inboxes} inbox stream(s) at ${options.restUrl}`);
    await connectAll(all, progress).catch((error: unknown) => {
      const reason = error instanceof Error ? error.message : String(error);
      const hint = / answered 429/.test(reason)
        ? 'a daily quota is spent: raise QUOTA_PER_ADDRESS (and QUOTA_PER_TOKEN) on the target, or pass --posts-with-tokens (load-tests/README.md, "Quotas")'
        : / answered 401/.test(reason)
          ? `a token of ${options.tokens} is not valid on this target (provisioned for another deployment, or revoked)`
          : `is BASE_URL (${options.baseUrl}) the deployment's site address, and is it up?`;
      throw new Error(`could not open the live feeds: ${reason}; ${hint}`);
    });

    const runId = Date.now().toString(36);
    const durationMs = options.durationS * 1000;
    progress(
      `sse-load: writing for ${options.durationS} s: ${options.rate} post(s)/s, ${recipients.length > 0 ? options.messageRate : 0} message(s)/s; cutting ${Math.round(options.killShare * 100)}% of the streams at ${options.durationS / 2} s`,
    );
    const started = performance.now();
    const ticker = setInterval(() => {
      const cutSoFar = all.reduce((sum, s) => sum + s.killed, 0);
      progress(
        `  ${Math.round((performance.now() - started) / 1000)} s: ${posts.size} post(s) and ${messageCount()} message(s) written, ${cutSoFar} stream(s) cut so far`,
      );
    }, 10_000);
    const cut = (async () => {
      await pause(durationMs / 2);
      for (const group of [postSubscribers, inboxSubscribers]) {
        // Only streams that have had an event: one cut before its first comes back without a
        // Last-Event-ID, and what was sent meanwhile is lost by design (EventSource does the same).
        const chosen = group
          .filter((subscriber) => subscriber.canResume())
          .sort(() => Math.random() - 0.5)
          .slice(0, Math.round(group.length * options.killShare));
        // Back within 0.2 to 1 s, each at its own moment, as clients of a dropped network would be.
        for (const subscriber of chosen) subscriber.kill(200 + Math.random() * 800);
      }
    })();
    await Promise.all([
      write(
        options.rate,
        durationMs,
        async (n) => {
          const poster = posters[n % posters.length]!;
          const at = performance.now();
          const id = await postJson(`${options.restUrl}/posts`, poster.token, { text: `sse-load ${runId}: post ${n}` }, postStats);
          if (id !== undefined) posts.set(id, { at });
        },
        postStats,
      ),
      recipients.length === 0
        ? Promise.resolve()
        : write(
            options.messageRate,
            durationMs,
            async (n) => {
              const to = recipients[n % recipients.length]!;
              // Senders in turn, skipping the recipient: a note to self is allowed, but not what a room mostly carries.
              const from = senders.map((_, k) => senders[(n + k) % senders.length]!).find((s) => s.id !== to.id) ?? senders[n % senders.length]!;
              const at = performance.now();
              const id = await postJson(`${options.restUrl}/messages`, from.token, { to: to.id, text: `sse-load ${runId}: message ${n}` }, messageStats);
              if (id !== undefined) messages.set(to.id, inbox(to.id).set(id, { at }));
            },
            messageStats,
          ),
      cut,
    ]).finally(() => clearInterval(ticker));

    // Deliveries still on their way, and cut streams catching up.
    const complete = (): boolean => {
      let done = true;
      for (const subscriber of all) {
        if (subscriber.complete) continue;
        subscriber.flush();
        const expected = subscriber.feed === 'posts' ? posts : inbox(subscriber.agentId);
        subscriber.complete = [...expected.keys()].every((id) => subscriber.seen.has(id));
        done &&= subscriber.complete;
      }
      return done;
    };
    const drainUntil = performance.now() + options.drainS * 1000;
    while (performance.now() < drainUntil && !complete()) await pause(50);
  } finally {
    clearInterval(flusher);
    for (const subscriber of all) subscriber.close();
  }

  const feeds: Partial<Record<Feed, FeedReport>> = {};
  if (options.posts > 0 || options.rate > 0) feeds.posts = report(postSubscribers, () => posts, posts.size, postStats, runStart);
  if (options.inboxes > 0) feeds.messages = report(inboxSubscribers, (s) => inbox(s.agentId), messageCount(), messageStats, runStart);
  const ok = Object.values(feeds).every((f) => f.missing === 0 && f.duplicates === 0 && f.events > 0);
  await mkdir(options.reportDir, { recursive: true });
  const reportPath = resolve(options.reportDir, `sse-fanout-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  await writeFile(reportPath, `${JSON.stringify({ createdAt: new Date().toISOString(), ok, options, feeds }, null, 2)}\n`);
  progress(`\n${table(feeds)}\n`);
  return { ok, reportPath, feeds };
}

async function main(): Promise<number> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(`usage: ${USAGE}\n(load-tests/README.md, "Live feeds")\n`);
    return 0;
  }
  try {
    const options = parseOptions(process.argv.slice(2), process.env);
    const result = await sseLoad(options, (line) => process.stdout.write(`${line}\n`));
    process.stdout.write(`report: ${result.reportPath}\n`);
    if (!result.ok) {
      process.stderr.write('sse-load: some deliveries were missing or duplicated, or a feed carried no event (see the table)\n');
      return 1;
    }
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`sse-load: ${error.message}; usage: ${USAGE}\n`);
      return 2;
    }
    process.stderr.write(`sse-load: ${(error as Error).message}\n`);
    return 1;
  }
}

process.exitCode = await main();
