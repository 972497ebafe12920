// Child process: `npm run cluster` (built) with Redis, announcing the router's port and the edge
// processes' addresses once everything answers.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort } from '@agentroom/kit';
import { announcePort, type EdgeProcess } from './children.js';

/** pino's level numbers: 40 is warn. */
const WARN = 40;

const port = await freePort();
const cluster = spawn(process.execPath, [fileURLToPath(new URL('../../launcher/dist/cluster.js', import.meta.url))], {
  // Info, so the cluster's ready line (with the edges' addresses) reaches us; only warnings and
  // errors are passed on to our stderr. stdout stays for the one ready line.
  env: { ...process.env, PORT: String(port), LOG_LEVEL: 'info', QUOTA_PER_ADDRESS: '1000000000', QUOTA_PER_TOKEN: '1000000000', SHUTDOWN_GRACE_MS: '1000' },
  stdio: ['ignore', 'pipe', 'inherit'],
});
cluster.once('exit', (code) => process.exit(code ?? 1));
for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => cluster.kill('SIGTERM'));

const edges = await new Promise<EdgeProcess[]>((resolve) => {
  createInterface({ input: cluster.stdout }).on('line', (line) => {
    let entry: { level?: unknown; msg?: unknown; edges?: unknown; metrics?: Record<string, unknown> };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      process.stderr.write(`${line}\n`);
      return;
    }
    if (typeof entry.msg === 'string' && entry.msg.startsWith('cluster ready') && Array.isArray(entry.edges)) {
      // The cluster names its edge processes edge-1, edge-2, … in the order of `edges`.
      resolve(entry.edges.map((url, i) => ({ url: String(url), metrics: String(entry.metrics?.[`edge-${i + 1}`] ?? '') })));
    } else if (typeof entry.level === 'number' && entry.level >= WARN) {
      process.stderr.write(`${line}\n`);
    }
  });
});

// The router is the last process the cluster starts; its health answering 200 means Redis is in use.
for (;;) {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/health`, { signal: AbortSignal.timeout(1_000) });
    if (response.status === 200) break;
  } catch {
    // not listening yet
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
}
announcePort(port, { edges });
