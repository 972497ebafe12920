// What `npm run chaos` and the fault smoke test (e2e/cluster/chaos.test.ts) share: the cluster
// launcher as a child whose log we follow (process ids, restarts), a steady load of readers and
// writers with a deadline on every request, and the check that every acknowledged post is there.
import { randomUUID } from 'node:crypto';
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort } from '@agentroom/kit';

/** The built launcher, `npm run cluster` without its build step. */
const CLUSTER_SCRIPT = fileURLToPath(new URL('../../launcher/dist/cluster.js', import.meta.url));

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface LogLine {
  level?: number;
  msg?: string;
  process?: string;
  pid?: number;
  edges?: string[];
  pids?: Record<string, number>;
  /** Each process's `/metrics` URL, on its admin port (which also serves `/livez` and `/readyz`). */
  metrics?: Record<string, string>;
}

/** `npm run cluster` running as our child. */
export interface RunningCluster {
  /** The router, `http://127.0.0.1:<PORT>`. */
  origin: string;
  edges: string[];
  /** Each process's `/metrics` URL by name (`room`, `auth-2`, `edge-1`…), from the ready line. */
  metrics: Record<string, string>;
  /** Every line the launcher and its processes printed. */
  lines: string[];
  /** The current process id of a process (`room`, `messaging`, `auth`, `edge-1`, `router`). */
  pid(name: string): number;
  /** How many times the launcher has restarted `name` so far. */
  restarts(name: string): number;
  /** Resolves with the new pid once the launcher has restarted `name` more than `after` times. */
  restarted(name: string, after: number, timeoutMs?: number): Promise<number>;
  /** Resolves once `name` answers 200 on its `/readyz` (a restarted process is listening and its dependencies answer). */
  ready(name: string, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts the launcher (built) on a free port with `env` on top of ours, and waits for its ready line.
 * Quotas are raised so the load measures faults, not the daily quota.
 */
export async function startCluster(env: NodeJS.ProcessEnv, readyTimeoutMs = 60_000): Promise<RunningCluster> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, ['--enable-source-maps', CLUSTER_SCRIPT], {
    env: { ...process.env, PORT: String(port), LOG_LEVEL: 'info', LOG_FORMAT: 'json', QUOTA_PER_ADDRESS: '1000000000', QUOTA_PER_TOKEN: '1000000000', SHUTDOWN_GRACE_MS: '1000', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const pids = new Map<string, number>();
  const restartCounts = new Map<string, number>();
  const waiters = new Set<() => void>();
  let edges: string[] = [];
  let metrics: Record<string, string> = {};
  const readyz = new Map<string, string>();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the cluster was not ready within ${readyTimeoutMs / 1000} s:\n${lines.slice(-30).join('\n')}`)), readyTimeoutMs);
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
    throw error;
  }

  return {
    origin: `http://127.0.0.1:${port}`,
    edges,
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
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

// ---- the load ------------------------------------------------------------------------------------

export type Outcome = number | 'timeout' | 'network';

/** One request the load made. */
export interface Sample {
  kind: 'read' | 'write';
  startedAt: number;
  ms: number;
  outcome: Outcome;
  /** On a 503: the Retry-After header, if any. */
  retryAfter?: string | null;
}

export interface LoadOptions {
  readers: number;
  writers: number;
  /** Every request is aborted after this long (AbortSignal.timeout) and counted as a timeout. */
  deadlineMs: number;
  /** Pause between two requests of one worker, so two CPUs shared with the cluster are not saturated. */
  pauseMs: number;
}

/** What a window of the load saw. */
export interface WindowStats {
  requests: number;
  errors: number;
  /** Errors by status (`503`, `network`…). */
  byOutcome: Record<string, number>;
  timeouts: number;
  /** 503 answers without a Retry-After header. */
  withoutRetryAfter: number;
  maxMs: number;
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
  private running = false;
  private workers: Promise<void>[] = [];
  private written = 0;

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
      const body = (await response.json()) as unknown;
      outcome = response.status;
      if (response.status === 503) retryAfter = response.headers.get('retry-after');
      if (response.ok) onOk?.(body);
    } catch (error) {
      outcome = (error as Error).name === 'TimeoutError' ? 'timeout' : 'network';
    }
    this.samples.push({ kind, startedAt, ms: Date.now() - startedAt, outcome, ...(retryAfter !== undefined ? { retryAfter } : {}) });
  }

  private read(): Promise<void> {
    return this.timed('read', `${this.origin}/api/v1/posts?limit=20`, {});
  }

  private write(token: string): Promise<void> {
    this.written += 1;
    return this.timed(
      'write',
      `${this.origin}/api/v1/posts`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
        body: JSON.stringify({ text: `chaos write ${this.written}` }),
      },
      (body) => this.acknowledged.set((body as { id: string }).id, Date.now()),
    );
  }

  /** The requests that started in [from, to). */
  stats(from: number, to = Date.now()): WindowStats {
    const window = this.samples.filter((s) => s.startedAt >= from && s.startedAt < to);
    const failed = window.filter((s) => !(typeof s.outcome === 'number' && s.outcome < 400));
    const byOutcome: Record<string, number> = {};
    for (const s of failed) byOutcome[String(s.outcome)] = (byOutcome[String(s.outcome)] ?? 0) + 1;
    return {
      requests: window.length,
      errors: failed.length,
      byOutcome,
      timeouts: failed.filter((s) => s.outcome === 'timeout').length,
      withoutRetryAfter: window.filter((s) => s.outcome === 503 && !s.retryAfter).length,
      maxMs: Math.max(0, ...window.map((s) => s.ms)),
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
  if (body.checks) return `${String(body.status)} (${Object.entries(body.checks).map(([k, v]) => `${k} ${v}`).join(', ')})`;
  return `a problem, code ${body.code ?? '?'}: "${body.detail ?? ''}"`;
}

/** Waits until `check` holds, polling every 100 ms; answers how long it took, or throws after `timeoutMs`. */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<number> {
  const started = Date.now();
  for (;;) {
    try {
      if (await check()) return Date.now() - started;
    } catch {
      // not yet
    }
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}
