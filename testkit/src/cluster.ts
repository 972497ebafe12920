// What `npm run chaos`, the bench and the cluster tests (e2e/cluster/) share: the cluster
// launcher as a child whose log we follow (process ids, restarts), a steady load of readers and
// writers with a deadline on every request, and the check that every acknowledged post is there.
import { randomUUID } from 'node:crypto';
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, type LocalPostgres, NODE_FLAGS, startPostgresServer } from '@agentroom/kit/local';
import { sleep, until } from './wait.js';

/** The built launcher, `npm run cluster` without its build step. */
const CLUSTER_SCRIPT = fileURLToPath(new URL('../../launcher/dist/cluster.js', import.meta.url));

interface LogLine {
  level?: number;
  msg?: string;
  process?: string;
  pid?: number;
  edges?: string[];
  /** The first record process's gRPC address. */
  record?: string;
  /** The record's PostgreSQL, its password left out. */
  database?: string;
  pids?: Record<string, number>;
  /** Each process's `/metrics` URL, on its admin port (which also serves `/livez` and `/readyz`). */
  metrics?: Record<string, string>;
}

/** `npm run cluster` running as our child. */
export interface RunningCluster {
  /** The router, `http://127.0.0.1:<PORT>`. */
  origin: string;
  edges: string[];
  /** The first record process's gRPC address (`127.0.0.1:<port>`): every post the room acknowledged, and search. */
  record: string;
  /** The PostgreSQL the record keeps its posts in (its password left out). */
  database: string;
  /** Each process's `/metrics` URL by name (`room`, `auth-2`, `edge-1`…), from the ready line. */
  metrics: Record<string, string>;
  /** Every line the launcher and its processes printed. */
  lines: string[];
  /** The current process id of a process (`room`, `record`, `messaging`, `auth`, `edge-1`, `router`, `postgres`). */
  pid(name: string): number;
  /** How many times the launcher has restarted `name` so far. */
  restarts(name: string): number;
  /** Resolves with the new pid once the launcher has restarted `name` more than `after` times. */
  restarted(name: string, after: number, timeoutMs?: number): Promise<number>;
  /** Resolves once `name` answers 200 on its `/readyz` (a restarted process is listening and its dependencies answer). */
  ready(name: string, timeoutMs?: number): Promise<void>;
  /** With `restartablePostgres`: the cluster's PostgreSQL, which a test may stop and start again. */
  postgres: RestartablePostgres | undefined;
  stop(): Promise<void>;
}

/** A PostgreSQL a test stops (a fast shutdown: its clients are disconnected) and starts again on the same port and data folder. */
export interface RestartablePostgres {
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export interface ClusterOptions {
  /** How long the launcher may take to print its ready line; 60 s by default. */
  readyTimeoutMs?: number;
  /**
   * Start the cluster's PostgreSQL here (its DATABASE_URL), not in the launcher, so that the test
   * can stop it and start it again: `RunningCluster.postgres`.
   */
  restartablePostgres?: boolean;
}

/** A PostgreSQL in a temp folder of its own, kept across its restarts and removed by `close`. */
async function restartablePostgres(): Promise<RestartablePostgres & { close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'agentroom-cluster-postgres-'));
  let server: LocalPostgres | undefined = await startPostgresServer({ dir, unsafeNoFsync: true });
  const { port, url } = server;
  return {
    url,
    async stop() {
      await server?.stop();
      server = undefined;
    },
    async start() {
      server ??= await startPostgresServer({ dir, port, unsafeNoFsync: true });
    },
    async close() {
      await server?.stop();
      server = undefined;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Starts the launcher (built) on a free port with `env` on top of ours, and waits for its ready line.
 * Quotas are raised so the load measures faults, not the daily quota.
 */
export async function startCluster(env: NodeJS.ProcessEnv, options: ClusterOptions = {}): Promise<RunningCluster> {
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const port = await freePort();
  const postgres = options.restartablePostgres ? await restartablePostgres() : undefined;
  const child: ChildProcess = spawn(process.execPath, [...NODE_FLAGS, CLUSTER_SCRIPT], {
    env: {
      ...process.env,
      PORT: String(port),
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      QUOTA_PER_ADDRESS: '1000000000',
      QUOTA_PER_TOKEN: '1000000000',
      SHUTDOWN_GRACE_MS: '1000',
      ...env,
      ...(postgres ? { DATABASE_URL: postgres.url } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const pids = new Map<string, number>();
  const restartCounts = new Map<string, number>();
  const waiters = new Set<() => void>();
  let edges: string[] = [];
  let record = '';
  let database = '';
  let metrics: Record<string, string> = {};
  const readyz = new Map<string, string>();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the cluster was not ready within ${readyTimeoutMs / 1000} s:\n${lines.slice(-30).join('\n')}`)),
      readyTimeoutMs,
    );
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the cluster exited (${signal ?? code}) before it was ready:\n${lines.slice(-30).join('\n')}`));
    });
    createInterface({ input: child.stderr! }).on('line', (line) => lines.push(line));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(line);
      let entry: LogLine;
      try {
        entry = JSON.parse(line) as LogLine;
      } catch {
        return;
      }
      if (entry.msg?.startsWith('cluster ready') && entry.pids) {
        for (const [name, pid] of Object.entries(entry.pids)) pids.set(name, pid);
        edges = entry.edges ?? [];
        record = entry.record ?? '';
        database = entry.database ?? '';
        metrics = entry.metrics ?? {};
        for (const [name, url] of Object.entries(metrics)) readyz.set(name, url.replace(/\/metrics$/, '/readyz'));
        clearTimeout(timer);
        resolve();
      } else if (entry.process !== undefined && entry.pid !== undefined && entry.msg?.includes(' restarted (pid')) {
        pids.set(entry.process, entry.pid);
        restartCounts.set(entry.process, (restartCounts.get(entry.process) ?? 0) + 1);
        for (const wake of waiters) wake();
      }
    });
  });
  try {
    await ready;
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    await postgres?.close();
    throw error;
  }

  return {
    origin: `http://127.0.0.1:${port}`,
    edges,
    record,
    database,
    metrics,
    lines,
    pid(name) {
      const pid = pids.get(name);
      if (pid === undefined) throw new Error(`no process named ${name} (have ${[...pids.keys()].join(', ')})`);
      return pid;
    },
    restarts: (name) => restartCounts.get(name) ?? 0,
    async restarted(name, after, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while ((restartCounts.get(name) ?? 0) <= after) {
        if (Date.now() > deadline) throw new Error(`${name} was not restarted within ${timeoutMs / 1000} s:\n${lines.slice(-20).join('\n')}`);
        await new Promise<void>((resolve) => {
          const wake = (): void => {
            waiters.delete(wake);
            resolve();
          };
          waiters.add(wake);
          setTimeout(wake, 200);
        });
      }
      return pids.get(name)!;
    },
    async ready(name, timeoutMs = 30_000) {
      const url = readyz.get(name);
      if (url === undefined) throw new Error(`no admin port for ${name} (have ${[...readyz.keys()].join(', ')})`);
      await until(`${name} ready`, async () => (await fetch(url, { signal: AbortSignal.timeout(1_000) }).catch(() => undefined))?.status === 200, timeoutMs);
    },
    postgres,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      }
      await postgres?.close();
    },
  };
}

// ---- the load ------------------------------------------------------------------------------------

export type Outcome = number | 'timeout' | 'network';

/**
 * What a request of the load does: `read` lists posts (every other one with `Cache-Control: no-cache`,
 * so the room answers it rather than edge's memory), `write` creates a post, `inbox` lists the reader
 * token's notifications (messaging), `webhooks` lists its webhooks (delivery), `page` reads the
 * sign-in page (auth's pages, through the router).
 */
export type RequestKind = 'read' | 'write' | 'message' | 'inbox' | 'webhooks' | 'page';

/** One request the load made. */
export interface Sample {
  kind: RequestKind;
  startedAt: number;
  ms: number;
  outcome: Outcome;
  /** On a 503: the Retry-After header, if any. */
  retryAfter?: string | null;
}

export interface LoadOptions {
  readers: number;
  writers: number;
  /** Workers listing the notifications of `readerToken`'s agent (the messaging service). */
  inboxReaders?: number;
  /** Workers listing the webhooks of `readerToken`'s agent (the delivery service). */
  webhookReaders?: number;
  /** Workers reading the sign-in page (the auth service's pages). */
  pageReaders?: number;
  /** A token with `messages:read`, for the inbox and webhook readers. */
  readerToken?: string;
  /** Workers sending direct messages to `messageTo` (messaging's SendMessage), each with a writer's token (which needs `messages:write`). */
  messageWriters?: number;
  /** The agent id the direct messages go to. */
  messageTo?: string;
  /** Appended to every post's text: `@<agent id>` makes each post a notification of that agent. */
  mention?: string;
  /** Every request is aborted after this long (AbortSignal.timeout) and counted as a timeout. */
  deadlineMs: number;
  /** Pause between two requests of one worker, so two CPUs shared with the cluster are not saturated. */
  pauseMs: number;
}

/** What a window of the load saw. */
export interface WindowStats {
  requests: number;
  errors: number;
  /** Errors by kind of request and status (`write 503`, `read network`…). */
  byOutcome: Record<string, number>;
  timeouts: number;
  /** 503 answers without a Retry-After header. */
  withoutRetryAfter: number;
  maxMs: number;
  /** The kind of request that took `maxMs`. */
  slowest: RequestKind | undefined;
  writesAcknowledged: number;
  /** ms from the window's start to the end of its last failed request (0 when none failed). */
  lastErrorAfterMs: number;
}

/**
 * Readers list posts; writers create posts with an Idempotency-Key, each with its own token.
 * Every post that was answered 201 is remembered with the moment it was acknowledged.
 */
export class Load {
  readonly samples: Sample[] = [];
  /** Acknowledged posts: id → when the 201 arrived. */
  readonly acknowledged = new Map<string, number>();
  /** Acknowledged direct messages: id → when the 201 arrived. */
  readonly messagesAcknowledged = new Map<string, number>();
  private running = false;
  private workers: Promise<void>[] = [];
  private written = 0;
  private messages = 0;
  private reads = 0;

  constructor(
    private readonly origin: string,
    private readonly tokens: string[],
    private readonly options: LoadOptions,
  ) {}

  start(): void {
    this.running = true;
    for (let i = 0; i < this.options.readers; i += 1) this.workers.push(this.loop(() => this.read()));
    for (let i = 0; i < this.options.writers; i += 1) {
      const token = this.tokens[i % this.tokens.length]!;
      this.workers.push(this.loop(() => this.write(token)));
    }
    const { readerToken, messageTo } = this.options;
    if ((this.options.messageWriters ?? 0) > 0 && messageTo === undefined) throw new Error('message writers need messageTo');
    for (let i = 0; i < (this.options.messageWriters ?? 0); i += 1) {
      const token = this.tokens[i % this.tokens.length]!;
      this.workers.push(this.loop(() => this.message(token, messageTo ?? '')));
    }
    const asReader = { authorization: `Bearer ${readerToken ?? ''}` };
    if ((this.options.inboxReaders ?? 0) + (this.options.webhookReaders ?? 0) > 0 && readerToken === undefined)
      throw new Error('inbox and webhook readers need a readerToken');
    for (let i = 0; i < (this.options.inboxReaders ?? 0); i += 1)
      this.workers.push(this.loop(() => this.timed('inbox', `${this.origin}/api/v1/notifications?limit=5`, { headers: asReader })));
    for (let i = 0; i < (this.options.webhookReaders ?? 0); i += 1)
      this.workers.push(this.loop(() => this.timed('webhooks', `${this.origin}/api/v1/webhooks`, { headers: asReader })));
    for (let i = 0; i < (this.options.pageReaders ?? 0); i += 1) this.workers.push(this.loop(() => this.timed('page', `${this.origin}/signin`, {})));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.workers);
    this.workers = [];
  }

  private async loop(request: () => Promise<void>): Promise<void> {
    while (this.running) {
      await request();
      await sleep(this.options.pauseMs);
    }
  }

  private async timed(kind: Sample['kind'], url: string, init: RequestInit, onOk?: (body: unknown) => void): Promise<void> {
    const startedAt = Date.now();
    let outcome: Outcome;
    let retryAfter: string | null | undefined;
    try {
      const response = await fetch(url, { ...init, signal: AbortSignal.timeout(this.options.deadlineMs) });
      // Read whole (pages are HTML), parsed only when the caller wants the answer.
      const body = await response.text();
      outcome = response.status;
      if (response.status === 503) retryAfter = response.headers.get('retry-after');
      if (response.ok) onOk?.(JSON.parse(body) as unknown);
    } catch (error) {
      outcome = (error as Error).name === 'TimeoutError' ? 'timeout' : 'network';
    }
    this.samples.push({ kind, startedAt, ms: Date.now() - startedAt, outcome, ...(retryAfter !== undefined ? { retryAfter } : {}) });
  }

  private read(): Promise<void> {
    this.reads += 1;
    return this.timed('read', `${this.origin}/api/v1/posts?limit=20`, this.reads % 2 === 0 ? { headers: { 'cache-control': 'no-cache' } } : {});
  }

  private write(token: string): Promise<void> {
    this.written += 1;
    const text = `chaos write ${this.written}${this.options.mention === undefined ? '' : ` ${this.options.mention}`}`;
    return this.create('write', '/api/v1/posts', token, { text }, this.acknowledged);
  }

  private message(token: string, to: string): Promise<void> {
    this.messages += 1;
    return this.create('message', '/api/v1/messages', token, { to, text: `chaos message ${this.messages}` }, this.messagesAcknowledged);
  }

  /** POSTs `body` to `path` as `token`'s agent with a fresh Idempotency-Key; a 2xx's id goes into `acknowledged`, with when it arrived. */
  private create(kind: RequestKind, path: string, token: string, body: object, acknowledged: Map<string, number>): Promise<void> {
    return this.timed(
      kind,
      `${this.origin}${path}`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
        body: JSON.stringify(body),
      },
      (answer) => acknowledged.set((answer as { id: string }).id, Date.now()),
    );
  }

  /**
   * The requests that ended in [from, to): a request in flight when a fault struck counts in the
   * fault's window, where its failure belongs.
   */
  stats(from: number, to = Date.now()): WindowStats {
    const window = this.samples.filter((s) => s.startedAt + s.ms >= from && s.startedAt + s.ms < to);
    const failed = window.filter((s) => !(typeof s.outcome === 'number' && s.outcome < 400));
    const byOutcome: Record<string, number> = {};
    for (const s of failed) byOutcome[`${s.kind} ${String(s.outcome)}`] = (byOutcome[`${s.kind} ${String(s.outcome)}`] ?? 0) + 1;
    return {
      requests: window.length,
      errors: failed.length,
      byOutcome,
      timeouts: failed.filter((s) => s.outcome === 'timeout').length,
      withoutRetryAfter: window.filter((s) => s.outcome === 503 && !s.retryAfter).length,
      maxMs: Math.max(0, ...window.map((s) => s.ms)),
      slowest: window.reduce<Sample | undefined>((slowest, s) => (slowest === undefined || s.ms > slowest.ms ? s : slowest), undefined)?.kind,
      writesAcknowledged: window.filter((s) => s.kind === 'write' && s.outcome === 201).length,
      lastErrorAfterMs: Math.max(0, ...failed.map((s) => s.startedAt + s.ms - from)),
    };
  }

  /**
   * Waits until the last `quietMs` saw requests and no failure (the system has recovered), or
   * `timeoutMs` has passed; answers whether it recovered.
   */
  async settled(quietMs = 2_000, timeoutMs = 30_000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      await sleep(250);
      const recent = this.stats(Date.now() - quietMs);
      // Requests still in flight have no sample yet: a hanging request shows up once it ends.
      if (recent.requests >= 2 && recent.errors === 0) return true;
      if (Date.now() > deadline) return false;
    }
  }
}

/**
 * A live feed (Server-Sent Events) followed through the router for the whole run, as a browser's
 * EventSource follows it: when the stream ends or breaks, it is opened again with `Last-Event-ID`
 * a quarter of a second later. It keeps what `keyOf` finds in each event (a post's id) and when each
 * cut happened, so a run can say whether a fault cut the stream and whether anything was missed.
 */
export class LiveFeed {
  /** What each event delivered, by `keyOf`. */
  readonly keys = new Set<string>();
  /** When an open stream ended or broke (not counting `stop`, nor attempts to reopen it that were refused). */
  readonly cuts: number[] = [];
  private lastId: string | undefined;
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly abort = new AbortController();

  constructor(
    private readonly url: string,
    private readonly headers: Record<string, string>,
    private readonly keyOf: (event: string, data: unknown) => string | undefined,
  ) {}

  /** Resolves once the first stream is open. */
  async start(): Promise<void> {
    this.running = true;
    let opened!: () => void;
    const first = new Promise<void>((resolve) => (opened = resolve));
    this.loop = this.follow(opened);
    await first;
  }

  async stop(): Promise<void> {
    this.running = false;
    this.abort.abort();
    await this.loop;
  }

  /** Resolves once `keys` holds every one of `wanted`, or after `timeoutMs`; answers those still missing. */
  async awaitKeys(wanted: readonly string[], timeoutMs: number): Promise<string[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const missing = wanted.filter((key) => !this.keys.has(key));
      if (missing.length === 0 || Date.now() > deadline) return missing;
      await sleep(250);
    }
  }

  private async follow(opened: () => void): Promise<void> {
    while (this.running) {
      let open = false;
      try {
        const response = await fetch(this.url, {
          headers: { ...this.headers, accept: 'text/event-stream', ...(this.lastId === undefined ? {} : { 'last-event-id': this.lastId }) },
          signal: this.abort.signal,
        });
        if (response.status !== 200 || !response.body) throw new Error(`the feed answered ${response.status}`);
        open = true;
        opened();
        const decoder = new TextDecoder();
        const reader = response.body.getReader();
        let pending = '';
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          pending += decoder.decode(value, { stream: true });
          let end: number;
          while ((end = pending.indexOf('\n\n')) >= 0) {
            this.receive(pending.slice(0, end));
            pending = pending.slice(end + 2);
          }
        }
      } catch {
        // Broken (counted below, like an end, unless we stopped it) or refused (tried again).
      }
      if (!this.running) return;
      if (open) this.cuts.push(Date.now());
      await sleep(250);
    }
  }

  private receive(block: string): void {
    let id: string | undefined;
    let event = 'message';
    let data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('id: ')) id = line.slice(4);
      else if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data += line.slice(6);
    }
    if (id === undefined || data === '') return;
    this.lastId = id;
    const key = this.keyOf(event, JSON.parse(data) as unknown);
    if (key !== undefined) this.keys.add(key);
  }
}

/** Every post id the room lists now, through the router, page by page. */
export async function listedPostIds(origin: string): Promise<Set<string>> {
  const ids = new Set<string>();
  let cursor: string | null = null;
  do {
    const url: string = `${origin}/api/v1/posts?limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    if (response.status !== 200) throw new Error(`listing posts answered ${response.status}: ${await response.text()}`);
    const page = (await response.json()) as { data: { id: string }[]; next_cursor: string | null };
    for (const post of page.data) ids.add(post.id);
    cursor = page.next_cursor;
  } while (cursor);
  return ids;
}

/** Every message of the inbox of `token`'s agent, newest first: its id and text, through the API's pages. */
export async function listedMessages(origin: string, token: string): Promise<{ id: string; text: string }[]> {
  const messages: { id: string; text: string }[] = [];
  let cursor: string | null = null;
  do {
    const url: string = `${origin}/api/v1/messages?limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) });
    if (response.status !== 200) throw new Error(`listing messages answered ${response.status}: ${await response.text()}`);
    const page = (await response.json()) as { data: { id: string; text: string }[]; next_cursor: string | null };
    messages.push(...page.data.map(({ id, text }) => ({ id, text })));
    cursor = page.next_cursor;
  } while (cursor);
  return messages;
}

/** What GET /health answers: the health document, or (when it cannot run) a problem. */
export interface HealthAnswer {
  status?: string | number;
  storage?: string;
  checks?: Record<string, string>;
  code?: string;
  detail?: string;
  retry_after?: number;
}

/** GET /health through the router: its status and body. */
export async function health(origin: string): Promise<{ status: number; body: HealthAnswer }> {
  const response = await fetch(`${origin}/api/v1/health`, { signal: AbortSignal.timeout(5_000) });
  return { status: response.status, body: (await response.json()) as HealthAnswer };
}

/** One line for a health answer: `degraded (storage down, room serving…)` or `problem internal: …`. */
export function describeHealth(body: HealthAnswer): string {
  if (body.checks)
    return `${String(body.status)} (${Object.entries(body.checks)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')})`;
  return `a problem, code ${body.code ?? '?'}: "${body.detail ?? ''}"`;
}
