// Child process: `npm run cluster` (built) with Redis, announcing the router's port, the edge
// processes' addresses, the room's gRPC address and every process's pid once everything answers.
// With BENCH_CLUSTER_FRONT=envoy, `npm run cluster -- --envoy`: the real Envoy on that port in place
// of the router, as deployed.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort } from '@agentroom/kit/local';
import { onParentGone } from '@agentroom/kit/process';
import { z } from 'zod';
import { announcePort, type EdgeProcess, killPids } from './children.js';

/** pino's level numbers: 40 is warn. */
const WARN = 40;
/** How pino starts an info line: edge writes one per request, read here only to be dropped. */
const INFO_PREFIX = '{"level":30,';
/** Envoy's access log line (its keys sorted): one per request too, dropped as well. */
const ENVOY_ACCESS = '"service":"envoy"';

const front = process.env.BENCH_CLUSTER_FRONT === 'envoy' ? 'envoy' : 'router';

/** What the bench reads of the launcher's `cluster ready` line. */
const clusterReady = z.object({
  edges: z.array(z.string()),
  metrics: z.record(z.string(), z.string()),
  room: z.string(),
  /** The first record process's gRPC address. */
  record: z.string().optional(),
  /** room, messaging, delivery, auth, edge-N, router or envoy, and the redis-server the launcher started. */
  pids: z.record(z.string(), z.number().int()),
});

const port = await freePort();
const cluster = spawn(
  process.execPath,
  [fileURLToPath(new URL('../../launcher/dist/cluster.js', import.meta.url)), ...(front === 'envoy' ? ['--envoy'] : [])],
  {
    // Info, so the cluster's ready line (with the edges' addresses) reaches us; only warnings and
    // errors are passed on to our stderr. stdout stays for the one ready line. Webhooks may target
    // loopback: the webhooks row's receiver listens on 127.0.0.1. Envoy's coarse guard (1,000
    // requests a second from everyone by default) is lifted, so its rows measure the services
    // behind it rather than the guard, as the quotas are.
    env: {
      ...process.env,
      ...(front === 'envoy' ? { ENVOY_RATE_LIMIT_PER_SECOND: '1000000000', ENVOY_RATE_LIMIT_BURST: '1000000000' } : {}),
      PORT: String(port),
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      QUOTA_PER_ADDRESS: '1000000000',
      QUOTA_PER_TOKEN: '1000000000',
      SHUTDOWN_GRACE_MS: '1000',
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);
cluster.once('exit', (code) => process.exit(code ?? 1));

/** The launcher stops its processes one by one, each within SHUTDOWN_GRACE_MS (1 s here): this is plenty. */
const CLUSTER_STOP_GRACE_MS = 10_000;
/** Every process of the cluster, once its ready line has named them. */
let processes: Record<string, number> = {};
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    cluster.kill('SIGTERM');
    // A process that does not stop would keep the launcher (and our pipes) alive: kill them all, then the launcher exits and so do we.
    setTimeout(() => {
      const stuck = Object.entries(processes).filter(([, pid]) => isAlive(pid));
      process.stderr.write(
        `the cluster did not stop within ${CLUSTER_STOP_GRACE_MS / 1000} s (still running: ${stuck.map(([name]) => name).join(', ') || 'the launcher'}); killing it\n`,
      );
      killPids(stuck.map(([, pid]) => pid));
      cluster.kill('SIGKILL');
    }, CLUSTER_STOP_GRACE_MS);
  });
}

// The bench gone (killed, even with SIGKILL: our IPC channel to it closed), the cluster is stopped as on SIGTERM.
onParentGone(() => process.kill(process.pid, 'SIGTERM'), 'channel');

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const ready = await new Promise<z.infer<typeof clusterReady>>((resolve) => {
  createInterface({ input: cluster.stdout }).on('line', (line) => {
    // Skipped unparsed: this process shares the machine with the load, and should cost it little.
    if (line.startsWith(INFO_PREFIX) && !line.includes('"msg":"cluster ready')) return;
    if (line.includes(ENVOY_ACCESS) && line.includes('"level":"info"')) return;
    let entry: { level?: unknown; msg?: unknown };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      process.stderr.write(`${line}\n`);
      return;
    }
    if (typeof entry.msg === 'string' && entry.msg.startsWith('cluster ready')) {
      const parsed = clusterReady.safeParse(entry);
      if (!parsed.success) throw new Error(`the cluster's ready line lacks what the bench needs (${parsed.error.message}): ${line}`);
      resolve(parsed.data);
    } else if (typeof entry.level === 'number' && entry.level >= WARN) {
      process.stderr.write(`${line}\n`);
    }
  });
});
// The cluster names its edge processes edge-1, edge-2, … in the order of `edges`.
const edges: EdgeProcess[] = ready.edges.map((url, i) => ({ url, metrics: ready.metrics[`edge-${i + 1}`] ?? '' }));

// The router (or Envoy) is the last process the cluster starts; health answering 200 through it means Redis is in use.
for (;;) {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/health`, { signal: AbortSignal.timeout(1_000) });
    if (response.status === 200) break;
  } catch {
    // not listening yet
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
}
// The launcher itself supervises (it does little under load), but it is one of the processes.
processes = { launcher: cluster.pid ?? 0, ...ready.pids };
announcePort(port, {
  edges,
  apiUrl: `http://127.0.0.1:${port}/api`,
  room: ready.room,
  ...(ready.record === undefined ? {} : { record: ready.record }),
  pids: processes,
});
