import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { StartupError } from '../startup.js';

export const REDIS_CLI_INSTALL_HINT =
  'redis-cli is not on PATH (it creates the test Redis Cluster). Install it with `bash scripts/install-test-deps.sh` (as root it installs the Debian package redis-tools), or `sudo apt-get install redis-tools` (Debian/Ubuntu; it normally comes with redis-server).';

export const REDIS_INSTALL_HINT =
  'redis-server is not on PATH. Install it with `bash scripts/install-test-deps.sh` (as root it runs `apt-get install -y redis-server`), or `sudo apt-get install redis-server`, or set REDIS_URL to a Redis you run.';

/** Below Linux's ephemeral range (32768-60999), from which every `listen(0)` and outgoing connection draws. */
const CHOSEN_PORTS = { from: 20_000, to: 32_000 };

function tryListen(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/**
 * A TCP port that is free on the loopback interface, for a process to listen on next. It is
 * picked at random below the OS's ephemeral range: a port the OS handed out by `listen(0)` and
 * took back could be handed at once to the next `listen(0)` or outgoing connection of any process
 * (a gRPC server on port 0, a client socket), and the listen that comes after would then fail.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const port = CHOSEN_PORTS.from + Math.floor(Math.random() * (CHOSEN_PORTS.to - CHOSEN_PORTS.from));
    if (await tryListen(port, host)) return port;
  }
  throw new Error(`no free port between ${CHOSEN_PORTS.from} and ${CHOSEN_PORTS.to} after 50 tries`);
}

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
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence, '--dir', dir, ...(options.extraArgs ?? [])], {
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

export interface LocalRedisCluster {
  /** The masters' addresses, for `new Cluster(nodes)` or `connectRedisCluster`. */
  nodes: { host: string; port: number }[];
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,…`: a description for logs and test names. */
  url: string;
  /** Where the nodes keep their cluster config files (removed on `stop`). */
  dir: string;
  stop(): Promise<void>;
}

function run(command: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
}

/**
 * Starts a throwaway three-master Redis Cluster on loopback ports (no replicas, persistence off):
 * three `redis-server --cluster-enabled yes`, joined by `redis-cli --cluster create`. Resolves once
 * every node says `cluster_state:ok`. For the store contract tests; about a second to start.
 */
export async function startRedisCluster(): Promise<LocalRedisCluster> {
  if (spawnSync('redis-server', ['--version']).error) throw new StartupError(REDIS_INSTALL_HINT);
  if (spawnSync('redis-cli', ['--version']).error) throw new StartupError(REDIS_CLI_INSTALL_HINT);
  const dir = mkdtempSync(join(tmpdir(), 'agentroom-redis-cluster-'));
  const servers: LocalRedis[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(servers.map((server) => server.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // Cluster bus ports default to port + 10000, which may be taken (or in the ephemeral range): each node gets one of its own.
    const picked = new Set<number>();
    while (picked.size < 6) picked.add(await freePort());
    const ports = [...picked];
    const started = await Promise.allSettled(
      [0, 1, 2].map((i) => {
        const port = ports[2 * i] as number;
        return startRedisServer({
          port,
          dir: join(dir, String(port)),
          extraArgs: ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--cluster-node-timeout', '2000', '--cluster-port', String(ports[2 * i + 1])],
        });
      }),
    );
    for (const result of started) if (result.status === 'fulfilled') servers.push(result.value);
    const failed = started.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
    const nodes = servers.map((server) => ({ host: '127.0.0.1', port: server.port }));
    const created = await run('redis-cli', ['--cluster', 'create', ...nodes.map((node) => `${node.host}:${node.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    if (created.code !== 0) throw new Error(`redis-cli --cluster create failed (exit ${created.code}): ${created.output.trim().split('\n').slice(-3).join(' ')}`);
    const deadline = Date.now() + 10_000;
    for (const node of nodes) {
      const probe = new Redis(node.port, node.host, { protocol: 2, maxRetriesPerRequest: 0 });
      probe.on('error', () => undefined);
      try {
        for (;;) {
          const info = await probe.cluster('INFO');
          if (/cluster_state:ok/.test(info)) break;
          if (Date.now() > deadline) throw new Error(`Redis Cluster node ${node.host}:${node.port} is not ok after 10 s: ${info.split('\n')[0] ?? ''}`);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      } finally {
        probe.disconnect();
      }
    }
    return { nodes, url: `redis+cluster://${nodes.map((node) => `${node.host}:${node.port}`).join(',')}`, dir, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
