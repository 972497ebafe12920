// A throwaway Redis Cluster on loopback ports, for the store contract tests, the failover tests and
// `npm run bench`'s failover row: test tooling, so it lives here rather than in kit.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, type LocalRedis, REDIS_INSTALL_HINT, startRedisServer } from '@agentroom/kit/local';
import { StartupError } from '@agentroom/kit/process';
import { Redis } from 'ioredis';

export const REDIS_CLI_INSTALL_HINT =
  'redis-cli is not on PATH (it creates the test Redis Cluster). Install it with `bash scripts/install-test-deps.sh` (as root it installs the Debian package redis-tools), or `sudo apt-get install redis-tools` (Debian/Ubuntu; it normally comes with redis-server).';

export interface LocalRedisCluster {
  /** The masters' addresses when it started, for `new Cluster(nodes)` or `connectRedisCluster`. */
  nodes: { host: string; port: number }[];
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,…` (the masters it started with): REDIS_URL for the services, and test names. */
  url: string;
  /** Where the nodes keep their data and cluster config files (removed on `stop`). */
  dir: string;
  /** `cluster-node-timeout`: how long a node may be unreachable before the others fail it over. */
  nodeTimeoutMs: number;
  /** Every node it started, masters and replicas, with the pid of its running process (undefined while killed). */
  servers(): { host: string; port: number; pid: number | undefined }[];
  /** The hash slot of `key`, as the cluster computes it (`CLUSTER KEYSLOT`). */
  slotOf(key: string): Promise<number>;
  /** The node that is master of `key`'s slot now, as a live node sees it (`CLUSTER SLOTS`). */
  masterOf(key: string): Promise<{ host: string; port: number; pid: number | undefined }>;
  /** Kills the node on `port` with SIGKILL (unless it is dead already) and reaps it; its folder and cluster config stay, for `restart`. */
  kill(port: number): Promise<void>;
  /** Starts the killed node on `port` again with its folder and cluster config: it rejoins, as a replica if it was failed over. */
  restart(port: number): Promise<void>;
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /**
   * Replicas per master: 0 (three masters, the store contract tests' fast form) or 1 (three masters
   * and three replicas, so a master's death is failed over).
   */
  replicas?: 0 | 1;
  /** Each node's append-only file with this fsync policy; no persistence when unset. */
  appendfsync?: 'always' | 'everysec' | 'no';
  /** `cluster-node-timeout` in ms (default 2000): with a replica, a dead master is replaced about 1 to 2.5 times this after it dies (2.1 to 4.8 s measured at 2 s). */
  nodeTimeoutMs?: number;
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

/** A node that answers, for the cluster-wide questions (KEYSLOT, SLOTS); a fresh connection each time, since any node may have been killed. */
async function askAnyNode<T>(ports: number[], ask: (node: Redis) => Promise<T>): Promise<T> {
  let lastError: unknown = new Error('no node of the Redis Cluster is running');
  for (const port of ports) {
    const node = new Redis(port, '127.0.0.1', { protocol: 2, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1_000 });
    node.on('error', () => undefined);
    try {
      await node.connect();
      return await ask(node);
    } catch (error) {
      lastError = error;
    } finally {
      node.disconnect();
    }
  }
  throw lastError;
}

/** Waits until `check` holds on the node at `port`, polling every 50 ms, or fails after 15 s saying what it saw last. */
async function untilNode(port: number, what: string, check: (node: Redis) => Promise<string | undefined>): Promise<void> {
  const node = new Redis(port, '127.0.0.1', { protocol: 2, maxRetriesPerRequest: 0 });
  node.on('error', () => undefined);
  const deadline = Date.now() + 15_000;
  try {
    for (;;) {
      const notYet = await check(node).catch((error: unknown) => (error as Error).message);
      if (notYet === undefined) return;
      if (Date.now() > deadline) throw new Error(`Redis Cluster node 127.0.0.1:${port}: ${what} not within 15 s (${notYet})`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    node.disconnect();
  }
}

/**
 * Starts a throwaway Redis Cluster on loopback ports: three masters, by default without replicas
 * and persistence (the store contract tests' form, about a second to start), or with a replica
 * each (`replicas: 1`) and an append-only file, for failover scenarios. Each node is a
 * `redis-server --cluster-enabled yes`, joined by `redis-cli --cluster create`. Resolves once every
 * node says `cluster_state:ok` and every replica is in sync with its master.
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<LocalRedisCluster> {
  if (spawnSync('redis-server', ['--version']).error) throw new StartupError(REDIS_INSTALL_HINT);
  if (spawnSync('redis-cli', ['--version']).error) throw new StartupError(REDIS_CLI_INSTALL_HINT);
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 2_000;
  const count = 3 * (1 + (options.replicas ?? 0));
  const dir = mkdtempSync(join(tmpdir(), 'agentroom-redis-cluster-'));
  const servers = new Map<number, LocalRedis | undefined>();
  const busPorts = new Map<number, number>();
  const stop = async (): Promise<void> => {
    await Promise.all([...servers.values()].map((server) => server?.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  const startNode = (port: number): Promise<LocalRedis> =>
    startRedisServer({
      port,
      dir: join(dir, String(port)),
      ...(options.appendfsync === undefined ? {} : { appendfsync: options.appendfsync }),
      extraArgs: [
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        String(nodeTimeoutMs),
        '--cluster-port',
        String(busPorts.get(port)),
        // A replica's first sync starts at once instead of after the default 5 s.
        '--repl-diskless-sync-delay',
        '0',
      ],
    });
  try {
    // Cluster bus ports default to port + 10000, which may be taken (or in the ephemeral range): each node gets one of its own.
    const picked = new Set<number>();
    while (picked.size < 2 * count) picked.add(await freePort());
    const ports = [...picked];
    for (let i = 0; i < count; i += 1) busPorts.set(ports[2 * i] as number, ports[2 * i + 1] as number);
    const started = await Promise.allSettled([...busPorts.keys()].map(async (port) => servers.set(port, await startNode(port))));
    const failed = started.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
    const all = [...busPorts.keys()].map((port) => ({ host: '127.0.0.1', port }));
    const created = await run('redis-cli', [
      '--cluster',
      'create',
      ...all.map((node) => `${node.host}:${node.port}`),
      '--cluster-replicas',
      String(options.replicas ?? 0),
      '--cluster-yes',
    ]);
    if (created.code !== 0)
      throw new Error(`redis-cli --cluster create failed (exit ${created.code}): ${created.output.trim().split('\n').slice(-3).join(' ')}`);
    for (const { port } of all) {
      await untilNode(port, 'cluster_state:ok', async (node) => {
        const info = await node.cluster('INFO');
        return /cluster_state:ok/.test(info) ? undefined : (info.split('\n')[0] ?? '');
      });
    }
    // Every node knows every other and its role (gossip takes a moment), and a replica takes
    // part in failover only once it has synced with its master.
    for (const { port } of all) {
      await untilNode(port, 'every node known', async (node) => {
        const known = String(await node.cluster('NODES'))
          .trim()
          .split('\n')
          .filter((line) => /master|slave/.test(line.split(' ')[2] ?? ''));
        const replicas = known.filter((line) => line.split(' ')[2]?.includes('slave')).length;
        return known.length === count && replicas === count - 3 ? undefined : `knows ${known.length} nodes, ${replicas} replicas`;
      });
    }
    for (const { port } of all) {
      await untilNode(port, 'in sync', async (node) => {
        const replication = await node.info('replication');
        if (/role:master/.test(replication)) return undefined;
        return /master_link_status:up/.test(replication) ? undefined : 'replica not in sync yet';
      });
    }
    const masters = await askAnyNode([...busPorts.keys()], async (node) => {
      const slots = await node.cluster('SLOTS');
      return [...new Set(slots.flatMap(([, , master]) => (master ? [master[1]] : [])))].sort((a, b) => a - b);
    });
    const nodes = masters.map((port) => ({ host: '127.0.0.1', port }));
    const livePorts = (): number[] => [...servers].filter(([, server]) => server !== undefined).map(([port]) => port);
    const pidOf = (port: number): number | undefined => servers.get(port)?.pid;
    return {
      nodes,
      url: `redis+cluster://${nodes.map((node) => `${node.host}:${node.port}`).join(',')}`,
      dir,
      nodeTimeoutMs,
      servers: () => [...servers.keys()].map((port) => ({ host: '127.0.0.1', port, pid: pidOf(port) })),
      slotOf: (key) => askAnyNode(livePorts(), async (node) => Number(await node.cluster('KEYSLOT', key))),
      async masterOf(key) {
        return askAnyNode(livePorts(), async (node) => {
          const slot = Number(await node.cluster('KEYSLOT', key));
          const master = (await node.cluster('SLOTS')).find(([from, to]) => slot >= from && slot <= to)?.[2];
          if (!master) throw new Error(`no node serves slot ${slot} (${key})`);
          return { host: '127.0.0.1', port: master[1], pid: pidOf(master[1]) };
        });
      },
      async kill(port) {
        const server = servers.get(port);
        if (server === undefined) throw new Error(`no running Redis Cluster node on port ${port}`);
        try {
          if (server.pid !== undefined) process.kill(server.pid, 'SIGKILL');
        } catch {
          // Killed already, by a caller that timed the kill itself; it is reaped below all the same.
        }
        await server.stop(); // reaps it; the folder was given, so it stays
        servers.set(port, undefined);
      },
      async restart(port) {
        if (!busPorts.has(port)) throw new Error(`port ${port} is not a node of this Redis Cluster`);
        if (servers.get(port) !== undefined) throw new Error(`the Redis Cluster node on port ${port} is running`);
        servers.set(port, await startNode(port));
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
