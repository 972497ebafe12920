import { createHash } from 'node:crypto';
import { Cluster, type ClusterNode, Redis } from 'ioredis';
import { redisClusterNodes, withoutPassword } from '../config.js';
import type { Logger } from '../log.js';
import { StartupError } from '../startup.js';

export { Cluster, Redis } from 'ioredis';

/**
 * What a Redis store runs on: one server, or a Redis Cluster. Every key a store touches carries a
 * hash tag ({@link Keyspace}), so each multi-key command, MULTI and script stays in one slot.
 */
export type RedisClient = Redis | Cluster;

/**
 * A Cluster client configured like {@link connectRedis}'s single connection (RESP2, fail fast
 * while the cluster is unreachable). `nodes` are some of the cluster's nodes; the rest are found.
 */
export function connectRedisCluster(nodes: ClusterNode[], name: string, log?: Logger, auth: { username?: string; password?: string } = {}): Cluster {
  const cluster = newCluster(nodes, name, auth);
  reportConnectionTrouble(cluster, name, log);
  return cluster;
}

function newCluster(nodes: ClusterNode[], name: string, auth: { username?: string; password?: string }): Cluster {
  return new Cluster(nodes, {
    redisOptions: { protocol: 2, connectionName: name, connectTimeout: 2_000, maxRetriesPerRequest: 1, ...auth },
    clusterRetryStrategy: (attempt) => Math.min(attempt * 50, 250),
    // As on one server: commands of the same tick bound for the same node share one write.
    enableAutoPipelining: true,
  });
}

/**
 * Another connection (or cluster client) like `client`, for blocking reads or pub/sub: ioredis's
 * `Cluster.duplicate` takes startup nodes first and options nested under `redisOptions`.
 */
export function duplicateClient<T extends RedisClient>(client: T, name: string, options: { autoResubscribe?: boolean } = {}): T {
  if (client instanceof Cluster) return client.duplicate([], { redisOptions: { ...client.options.redisOptions, connectionName: name, ...options } }) as T;
  return (client as Redis).duplicate({ connectionName: name, ...options }) as T;
}

/**
 * Every key matching `pattern`, by SCAN: on a cluster node by node (each master holds its own
 * slots), since a keyless command reaches only one node there. For tests and operators, not hot paths.
 */
export async function keysMatching(client: RedisClient, pattern: string): Promise<string[]> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  const found: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      found.push(...keys);
      cursor = next;
    } while (cursor !== '0');
  }
  return found;
}

/**
 * Opens a Redis connection the way every service does.
 * RESP2 on purpose: ioredis 6 defaults to RESP3, and our stream code (XRANGE/XREAD replies) is
 * written for RESP2's nested arrays; the store contract tests pin this down.
 */
export function connectRedis(url: string, name: string, log?: Logger): Redis {
  const redis = newRedis(url, name);
  reportConnectionTrouble(redis, name, log);
  return redis;
}

function newRedis(url: string, name: string): Redis {
  return new Redis(url, {
    protocol: 2,
    connectionName: name,
    // While Redis is down a command waits for one reconnect attempt, then fails: callers answer
    // 503 within about half a second instead of holding the request (a command waits up to
    // (maxRetriesPerRequest + 1) reconnect delays). Attempts every 250 ms at most, so reads and
    // writes work again within a quarter of a second of Redis coming back (`npm run chaos`).
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    retryStrategy: (attempt) => Math.min(attempt * 50, 250),
    // Commands issued in the same tick go out in one write: under load a request's SET and its
    // neighbours' share a syscall (and Redis one read), the largest CPU cost of a write path.
    enableAutoPipelining: true,
  });
}

// Connection trouble is reported once per state change; commands fail on their own and answer 503.
function reportConnectionTrouble(redis: RedisClient, name: string, log?: Logger): void {
  let reported = false;
  redis.on('error', (error: Error) => {
    if (!reported) log?.warn({ err: error, connection: name }, 'Redis connection failed; retrying');
    reported = true;
  });
  redis.on('ready', () => {
    if (reported) log?.info({ connection: name }, 'Redis connection restored');
    reported = false;
  });
}

/**
 * Connects and checks that Redis answers, so a service with a wrong REDIS_URL refuses to start
 * with one line that says what is wrong (nothing listens, the password is refused…) and what to
 * do, instead of failing its first requests. Nothing is logged until the first answer.
 */
export async function openRedis(url: string, name: string, log?: Logger): Promise<RedisClient> {
  let redis: RedisClient;
  try {
    const cluster = redisClusterNodes(url);
    if (cluster) {
      const { nodes, ...auth } = cluster;
      redis = newCluster(nodes, name, auth);
    } else {
      redis = newRedis(url, name);
    }
  } catch (error) {
    throw new StartupError(`REDIS_URL=${withoutPassword(url)} is not a Redis URL (${(error as Error).message}): use one like redis://127.0.0.1:6379`);
  }
  let connectionError: Error | undefined;
  const remember = (error: Error): void => {
    connectionError ??= error;
  };
  redis.on('error', remember);
  try {
    await redis.ping();
  } catch (error) {
    redis.disconnect(); // `remember` stays: a late error event of this connection must not go unhandled
    throw new StartupError(redisProblem(url, connectionError ?? (error as Error)));
  }
  redis.off('error', remember);
  reportConnectionTrouble(redis, name, log);
  return redis;
}

/** What went wrong reaching the Redis at `url`, and what to do, in one line. */
export function redisProblem(url: string, error: Error): string {
  const shown = withoutPassword(url);
  const { code } = error as NodeJS.ErrnoException;
  const message = error.message.split('\n')[0] ?? '';
  const where = (() => {
    try {
      const parsed = new URL(url);
      return `${parsed.hostname}:${parsed.port || '6379'}`;
    } catch {
      return shown;
    }
  })();
  if (code === 'ECONNREFUSED') return `nothing listens at ${where} (REDIS_URL=${shown}): start Redis there, point REDIS_URL at a running one, or unset REDIS_URL for in-memory storage`;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `the host of REDIS_URL=${shown} is not found: fix REDIS_URL or unset it for in-memory storage`;
  if (code === 'ETIMEDOUT') return `Redis at ${where} (REDIS_URL=${shown}) did not answer in time: check the address, a firewall, and rediss:// (TLS) against redis:// (plain)`;
  if (/^(NOAUTH|WRONGPASS)|invalid password|AUTH.*without any password/i.test(message))
    return `Redis at ${where} refused the credentials in REDIS_URL=${shown} (${message}): put the right user and password in REDIS_URL (redis://user:password@host:port)`;
  return `Redis at ${where} (REDIS_URL=${shown}) does not answer (${message}): check that Redis runs there, or unset REDIS_URL for in-memory storage`;
}

/**
 * Key names: `<prefix>:<owner>:{<tag>}:<rest>`. The braces are a hash tag, so every key of one
 * tag lands in one Redis Cluster slot and multi-key commands stay legal there.
 */
export class Keyspace {
  constructor(
    readonly prefix: string,
    readonly owner: string,
  ) {}

  key(tag: string, ...rest: string[]): string {
    return [`${this.prefix}:${this.owner}:{${tag}}`, ...rest].join(':');
  }
}

const UNAVAILABLE = /Connection is closed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|connect ETIMEDOUT|Stream isn't writeable/;

/** True for errors that mean "Redis cannot be reached right now" rather than a bug. */
export function isStorageUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return error.name === 'MaxRetriesPerRequestError' || UNAVAILABLE.test(error.message);
}

/** RESP2 shape of one stream entry (XRANGE, XREVRANGE, XREAD): `[id, [field, value, field, value, …]]`. */
export type StreamEntry = [string, string[]];

/** A stream entry's fields by name. */
export function streamFields(fields: readonly string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) map.set(fields[i] as string, fields[i + 1] as string);
  return map;
}

/**
 * A Lua script run by its SHA1 (`EVALSHA`): Redis keeps scripts it has seen, so each call sends the
 * digest instead of the source, and Redis does not hash the source again. A server that does not
 * hold it yet (just started, restarted, `SCRIPT FLUSH`, another node of a cluster) answers NOSCRIPT,
 * and the call is sent once more with the source (`EVAL`), which loads it there. Quota counting runs
 * one on every request, so the difference shows in a profile.
 */
export class LuaScript {
  readonly sha: string;

  constructor(readonly source: string) {
    this.sha = createHash('sha1').update(source, 'utf8').digest('hex');
  }

  async run(redis: RedisClient, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return redis.eval(this.source, keys.length, ...keys, ...args);
    }
  }
}
