// Child process: `npm run cluster` (built) with Redis, announcing the router's port once it answers.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort } from '@agentroom/kit';
import { announcePort } from './children.js';

const port = await freePort();
const cluster = spawn(process.execPath, [fileURLToPath(new URL('../../gateway/dist/cluster.js', import.meta.url))], {
  env: { ...process.env, PORT: String(port), LOG_LEVEL: 'warn', QUOTA_PER_ADDRESS: '1000000000', QUOTA_PER_TOKEN: '1000000000', SHUTDOWN_GRACE_MS: '1000' },
  // Logs (warnings and errors only) go to our stderr; stdout stays for the one ready line.
  stdio: ['ignore', process.stderr, 'inherit'],
});
cluster.once('exit', (code) => process.exit(code ?? 1));
for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => cluster.kill('SIGTERM'));

// The router is the last process the cluster starts, so its health answering means all are up.
for (;;) {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/health`, { signal: AbortSignal.timeout(1_000) });
    if (response.status === 200) break;
  } catch {
    // not listening yet
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
}
announcePort(port);
