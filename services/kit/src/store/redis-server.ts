import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { StartupError } from '../startup.js';

export const REDIS_INSTALL_HINT =
  'redis-server is not on PATH. Install it with `bash scripts/install-test-deps.sh` (as root it runs `apt-get install -y redis-server`), or `sudo apt-get install redis-server`, or set REDIS_URL to a Redis you run.';

/** A free TCP port on the loopback interface, as the OS hands it out. */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface LocalRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/**
 * Starts a throwaway `redis-server` on a free loopback port, persistence off, in a temp folder.
 * For tests and `npm run cluster`; a missing binary fails with the command that installs it.
 */
export async function startRedisServer(): Promise<LocalRedis> {
  if (spawnSync('redis-server', ['--version']).error) throw new StartupError(REDIS_INSTALL_HINT);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'agentroom-redis-'));
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: 'ignore',
  });
  const url = `redis://127.0.0.1:${port}`;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const probe = new Redis(url, { protocol: 2, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => undefined); // refused connects are expected until the server is up
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await probe.connect();
      await probe.ping();
      break;
    } catch (error) {
      probe.disconnect();
      if (child.exitCode !== null || Date.now() > deadline) {
        child.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`redis-server did not start on port ${port}: ${(error as Error).message}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  probe.disconnect();
  return {
    url,
    port,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
