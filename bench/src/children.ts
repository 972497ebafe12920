import { type ChildProcess, type ChildProcessByStdio, spawn } from 'node:child_process';
import type { Server } from 'node:http';
import type { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS } from '@agentroom/kit/local';
import { onParentGone } from '@agentroom/kit/process';
import { z } from 'zod';

/** The one line a server child prints on stdout once it is ready; logs never look like it. */
const READY_LINE = /^\{"port":\d+[,}].*$/;
/** Longer than the cluster child's own grace for its processes (CLUSTER_STOP_GRACE_MS in cluster-server.ts). */
const STOP_GRACE_MS = 15_000;

// ---- what the parent and its children agree on -------------------------------------------------

const edgeProcess = z.object({ url: z.string(), metrics: z.string() });
/** An edge process of the cluster: where it answers HTTP, and its Prometheus `/metrics`. */
export type EdgeProcess = z.infer<typeof edgeProcess>;

/** The ready line: where the child listens, and what the parent may need beyond that. */
const readyLine = z.object({
  port: z.number().int(),
  /** The cluster's edge processes. */
  edges: z.array(edgeProcess).optional(),
  /** The product's API_URL. */
  apiUrl: z.string().optional(),
  /** The room's gRPC address (`127.0.0.1:<port>`), where the parent seeds posts. */
  room: z.string().optional(),
  /** The record service's gRPC address (the cluster's first record process). */
  record: z.string().optional(),
  /** Every process that serves the load, by name, when the child is not the only one (the cluster). */
  pids: z.record(z.string(), z.number().int()).optional(),
});
type Ready = z.infer<typeof readyLine>;

// ---- inside a child ----------------------------------------------------------------------------

/** Tells the parent the child is ready, where it listens, and what else it needs to know. */
export function announcePort(port: number, extra: Omit<Ready, 'port'> = {}): void {
  const ready: Ready = { port, ...extra };
  process.stdout.write(`${JSON.stringify(ready)}\n`);
}

/**
 * Runs `stop` once on SIGTERM (the parent) or SIGINT (Ctrl-C reaches the whole group), or once the
 * parent is gone (its IPC channel closed: it was killed, even with SIGKILL), then exits.
 */
export function stopOnSignal(stop: () => Promise<void>): void {
  let stopping = false;
  const onSignal = (): void => {
    if (stopping) return;
    stopping = true;
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
  onParentGone(onSignal, 'channel');
}

// ---- in the parent -----------------------------------------------------------------------------

/** In a child server (a baseline, the OTLP receiver): listens on a free loopback port, announces it, and closes on a signal. */
export function serveOnFreePort(server: Server): void {
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    announcePort(typeof address === 'object' && address ? address.port : 0);
  });
  stopOnSignal(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
}

export interface ServerChild {
  name: string;
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** The cluster's edge processes; empty for other children. */
  edges: EdgeProcess[];
  /** The product's API_URL (`http://127.0.0.1:<port>/api`), when the child announced it. */
  apiUrl: string | undefined;
  /** The room's gRPC address, when the child announced it. */
  room: string | undefined;
  /** The record service's gRPC address, when the child announced it. */
  record: string | undefined;
  /** The processes whose CPU time the load costs, by name: the child itself, or those it announced. */
  pids: Record<string, number>;
  /** Undefined while it runs, or once `stop` was asked; the exit code (or signal) once it has exited on its own. */
  exited(): string | undefined;
  /** SIGTERM, then SIGKILL if it has not exited within a few seconds. Safe to call twice. */
  stop(): Promise<void>;
}

/** Every child still running, including those not yet ready, for the last-resort kill. */
const running = new Set<ChildProcess>();
/**
 * The processes a child announced (the cluster's), until the child has stopped them: a child
 * killed outright, or dead on its own, leaves them behind, still holding our pipes open.
 */
const descendants = new Map<ChildProcess, number[]>();

/** SIGKILL to each of `pids` that is still there. */
export function killPids(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** For a process 'exit' handler, where nothing asynchronous runs: SIGKILL whatever is left. */
export function killServerChildrenNow(): void {
  for (const child of running) child.kill('SIGKILL');
  for (const pids of descendants.values()) killPids(pids);
  descendants.clear();
}

function exitDescription(child: ChildProcess): string | undefined {
  if (child.exitCode !== null) return `exit code ${child.exitCode}`;
  if (child.signalCode !== null) return `signal ${child.signalCode}`;
  return undefined;
}

/**
 * Starts `script` (a file next to this one in dist/) in its own Node process (with `flags`: a service's
 * by default), so the load generator
 * does not share its event loop, and waits for its port line. Its other output goes to our stderr,
 * prefixed with `name`, so a failing child explains itself.
 */
export function startServerChild(
  name: string,
  script: string,
  env: NodeJS.ProcessEnv,
  readyTimeoutMs: number,
  flags: readonly string[] = NODE_FLAGS,
): Promise<ServerChild> {
  const path = fileURLToPath(new URL(script, import.meta.url));
  // With an IPC channel, unused but for its close: the child stops by itself once we are gone, however we died.
  const child = spawn(process.execPath, [...flags, path], { env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] }) as ChildProcessByStdio<null, Readable, Readable>;
  running.add(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', () => running.delete(child));
  /** Whether `stop` was called: an exit we asked for is no problem of the run. */
  let stopAsked = false;

  const server = (ready: Ready): ServerChild => {
    if (ready.pids) descendants.set(child, Object.values(ready.pids));
    return {
      name,
      origin: `http://127.0.0.1:${ready.port}`,
      edges: ready.edges ?? [],
      apiUrl: ready.apiUrl,
      room: ready.room,
      record: ready.record,
      pids: ready.pids ?? { [name]: child.pid ?? 0 },
      exited: () => (stopAsked ? undefined : exitDescription(child)),
      async stop() {
        stopAsked = true;
        let killed = exitDescription(child) !== undefined;
        if (!killed) {
          child.kill('SIGTERM');
          const timer = setTimeout(() => {
            killed = true;
            child.kill('SIGKILL');
          }, STOP_GRACE_MS);
          await exited;
          clearTimeout(timer);
        }
        // A child that stopped as asked has stopped its processes; one that died or was killed may not have.
        if (killed) killPids(descendants.get(child) ?? []);
        descendants.delete(child);
      },
    };
  };

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
        const ready = readyLine.safeParse(JSON.parse(line));
        if (ready.success) resolve(server(ready.data));
        else {
          child.kill('SIGKILL');
          reject(new Error(`${name} announced itself in an unexpected shape: ${line}`));
        }
      } else {
        process.stderr.write(`[${name}] ${line}\n`);
      }
    });
  });
}

/** A child the bench started and stops: what it exited with, unless the bench asked it to stop. */
export interface Supervised {
  /** Undefined while it runs or once `stop` was asked; `exit <code or signal>` once it exited on its own. */
  exitedWith(): string | undefined;
  /** Whether it has exited (for whatever reason): its exit line, or undefined while it runs. */
  exitLine(): string | undefined;
  /** SIGTERM, then SIGKILL after 15 s; resolves once it has exited. */
  stop(): Promise<void>;
}

/** Watches `child` until it exits, and kills it when the bench's process exits first: it never outlives the bench. */
export function supervise(child: ChildProcess): Supervised {
  let stopAsked = false;
  let exitLine: string | undefined;
  const exited = new Promise<void>((resolve) => child.once('exit', (code, signal) => ((exitLine = `exit ${code ?? signal ?? '?'}`), resolve())));
  const killNow = (): void => void child.kill('SIGKILL');
  process.once('exit', killNow);
  return {
    exitedWith: () => (stopAsked ? undefined : exitLine),
    exitLine: () => exitLine,
    async stop() {
      stopAsked = true;
      if (exitLine === undefined) {
        child.kill('SIGTERM');
        const timer = setTimeout(killNow, 15_000);
        await exited;
        clearTimeout(timer);
      }
      process.off('exit', killNow);
    },
  };
}
