import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { exitingWithParent } from '../parent.js';
import { StartupError } from '../startup.js';
import { freePort } from './ports.js';

export const REDIS_INSTALL_HINT =
  'redis-server is not on PATH. Install it with `bash scripts/install-test-deps.sh` (as root it runs `apt-get install -y redis-server`), or `sudo apt-get install redis-server`, or set REDIS_URL to a Redis you run.';

export interface LocalRedis {
  url: string;
  port: number;
  /** The redis-server's process id (chaos tests kill it with SIGKILL). */
  pid: number | undefined;
  /** Where it keeps its files: the folder given, or its own temp folder. */
  dir: string;
  stop(): Promise<void>;
}

export interface RedisServerOptions {
  /** Listen here (e.g. to start it again where it was); a free port when unset. */
  port?: number;
  /**
   * Keep data in this folder (created if missing) and leave it there on `stop`, so a server
   * started again with the same `dir` reloads it; a throwaway temp folder when unset.
   */
  dir?: string;
  /** Append-only file with this fsync policy (`everysec` loses at most about a second of writes); no persistence when unset. */
  appendfsync?: 'always' | 'everysec' | 'no';
  /** More `redis-server` arguments (the cluster helper's `--cluster-enabled yes`, …). */
  extraArgs?: string[];
}

/**
 * Starts a `redis-server` on a loopback port: by default a throwaway one on a free port,
 * persistence off, in a temp folder. For tests, `npm run cluster` and `npm run chaos` (which asks
 * for an append-only file and starts it again on the same port and folder after killing it).
 * A missing binary fails with the command that installs it.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<LocalRedis> {
  if (spawnSync('redis-server', ['--version']).error) throw new StartupError(REDIS_INSTALL_HINT);
  const port = options.port ?? (await freePort());
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'agentroom-redis-'));
  mkdirSync(dir, { recursive: true });
  const persistence = options.appendfsync === undefined ? ['--appendonly', 'no'] : ['--appendonly', 'yes', '--appendfsync', options.appendfsync];
  // It stops by itself once this process is gone, however it died: no redis-server outlives a killed test run or cluster.
  const program = exitingWithParent('redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    ...persistence,
    '--dir',
    dir,
    ...(options.extraArgs ?? []),
  ]);
  const child = spawn(program.command, program.args, { stdio: ['pipe', 'ignore', 'ignore'] });
  child.stdin?.on('error', () => undefined); // nothing is written to it; its end is what counts
  const url = `redis://127.0.0.1:${port}`;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      child.stdin?.destroy();
      resolve();
    }),
  );
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
        if (ownDir) rmSync(dir, { recursive: true, force: true });
        throw new Error(`redis-server did not start on port ${port}: ${(error as Error).message}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  probe.disconnect();
  return {
    url,
    port,
    pid: child.pid,
    dir,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
