import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** The one line a server child prints on stdout once it is ready; logs never look like it. */
const READY_LINE = /^\{"port":\d+[,}].*$/;
const STOP_GRACE_MS = 5_000;

// ---- what the parent and its children agree on -------------------------------------------------

/** Posts the embedded server creates before it announces itself. */
export const SEEDED_POSTS = 1_000;

/** Environment of bare-server: the exact bytes, content type and status the server under test sent. */
export const BARE_ENV = { body: 'BENCH_BODY_BASE64', contentType: 'BENCH_CONTENT_TYPE', status: 'BENCH_STATUS' } as const;

// ---- inside a child ----------------------------------------------------------------------------

/** An edge process of the cluster: where it answers HTTP, and its Prometheus `/metrics`. */
export interface EdgeProcess {
  url: string;
  metrics: string;
}

interface Ready {
  port: number;
  edges?: EdgeProcess[];
  apiUrl?: string;
}

/**
 * Tells the parent the child is ready and where it listens (and, for the cluster, its edge
 * processes; for the embedded product, its API_URL).
 */
export function announcePort(port: number, extra: { edges?: EdgeProcess[]; apiUrl?: string } = {}): void {
  const ready: Ready = { port, ...extra };
  process.stdout.write(`${JSON.stringify(ready)}\n`);
}

/** Runs `stop` once on SIGTERM (the parent) or SIGINT (Ctrl-C reaches the whole group), then exits. */
export function stopOnSignal(stop: () => Promise<void>): void {
  const onSignal = (): void => {
    stop().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`stop failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
}

// ---- in the parent -----------------------------------------------------------------------------

export interface ServerChild {
  name: string;
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** The cluster's edge processes; empty for other children. */
  edges: EdgeProcess[];
  /** The product's API_URL (`http://127.0.0.1:<port>/api`), when the child announced it. */
  apiUrl: string | undefined;
  /** Undefined while it runs; the exit code (or signal) once it has exited. */
  exited(): string | undefined;
  /** SIGTERM, then SIGKILL if it has not exited within a few seconds. Safe to call twice. */
  stop(): Promise<void>;
}

/** Every child still running, including those not yet ready, for the last-resort kill. */
const running = new Set<ChildProcess>();

/** For a process 'exit' handler, where nothing asynchronous runs: SIGKILL whatever is left. */
export function killServerChildrenNow(): void {
  for (const child of running) child.kill('SIGKILL');
}

function exitDescription(child: ChildProcess): string | undefined {
  if (child.exitCode !== null) return `exit code ${child.exitCode}`;
  if (child.signalCode !== null) return `signal ${child.signalCode}`;
  return undefined;
}

/**
 * Starts `script` (a file next to this one in dist/) in its own Node process, so the load generator
 * does not share its event loop, and waits for its port line. Its other output goes to our stderr,
 * prefixed with `name`, so a failing child explains itself.
 */
export function startServerChild(name: string, script: string, env: NodeJS.ProcessEnv, readyTimeoutMs: number): Promise<ServerChild> {
  const path = fileURLToPath(new URL(script, import.meta.url));
  const child = spawn(process.execPath, ['--enable-source-maps', path], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', () => running.delete(child));

  const server = (origin: string, edges: EdgeProcess[], apiUrl: string | undefined): ServerChild => ({
    name,
    origin,
    edges,
    apiUrl,
    exited: () => exitDescription(child),
    async stop() {
      if (exitDescription(child) !== undefined) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    },
  });

  createInterface({ input: child.stderr }).on('line', (line) => process.stderr.write(`[${name}] ${line}\n`));

  return new Promise<ServerChild>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} did not announce its port within ${readyTimeoutMs} ms`));
    }, readyTimeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`${name} could not be spawned: ${error.message}`));
    });
    // 'close' rather than 'exit': by then the child's last words have been forwarded.
    child.once('close', () => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${exitDescription(child) ?? 'unknown'}) before announcing its port; see its output above`));
    });
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (READY_LINE.test(line)) {
        clearTimeout(timer);
        // Our own children write this line; its shape is ours (announcePort).
        const ready = JSON.parse(line) as Ready;
        resolve(server(`http://127.0.0.1:${ready.port}`, ready.edges ?? [], ready.apiUrl));
      } else {
        process.stderr.write(`[${name}] ${line}\n`);
      }
    });
  });
}
