import { createHash } from 'node:crypto';
import { Cluster, type ClusterNode, Redis } from 'ioredis';
import { redisClusterNodes, withoutPassword } from '../config.js';
import type { Logger } from '../log.js';
import { redisUp, unreplicatedWrites } from '../metrics.js';
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
  const cluster = new Cluster(nodes, {
    redisOptions: { protocol: 2, connectionName: name, connectTimeout: 2_000, maxRetriesPerRequest: 1, ...auth },
    clusterRetryStrategy: (attempt) => Math.min(attempt * 50, 250),
    // Reads go to masters: a replica may not have a post yet when its author reads the room.
    scaleReads: 'master',
    // When a master dies, a command sent to it, or to a cluster that answers CLUSTERDOWN until a
    // replica replaces it, is sent again every 100 ms after asking the cluster for its slots, so
    // clients follow the new master as soon as the cluster names it. A redirect (MOVED) waits as
    // long: right after a failover, nodes that have not heard of it yet redirect to each other, and
    // immediate retries spent the budget within milliseconds. Each retry and redirect counts, and
    // after 8 the command fails (a 503): about a second, within the gRPC deadline.
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    retryDelayOnTryAgain: 100,
    retryDelayOnMoved: 100,
    maxRedirections: MAX_REDIRECTIONS,
    // Unlike on one server, each command goes alone: ioredis's automatic pipelines gather the
    // commands of several slots bound for one node, and after a failover each slot's command is
    // answered MOVED with its own slot; ioredis then hands those MOVED errors to the callers
    // instead of following them, until its next slots refresh (500s, seen under load).
    enableAutoPipelining: false,
  });
  queueOnlyUntilReady(cluster);
  return cluster;
}

/** Retries and redirects a cluster command may take before it fails; about 100 ms each (see newCluster). */
const MAX_REDIRECTIONS = 8;

/**
 * Commands wait for the cluster client's first connection (a store may be used as soon as it is
 * made), and not when it has lost every node later: ioredis's offline queue would then hold them
 * until the cluster returns, so while the client is down, after it was ready once, they fail at
 * once (a 503). While it is ready the queue stays on, as ioredis expects: turned off there, it
 * refuses commands for a node connection still connecting, and a pipeline can lose part of its
 * commands that way and never be sent (seen with a master killed under load).
 */
function queueOnlyUntilReady(cluster: Cluster): void {
  let wasReady = false;
  cluster.options.enableOfflineQueue = true;
  cluster.on('ready', () => {
    wasReady = true;
    cluster.options.enableOfflineQueue = true;
  });
  for (const down of ['close', 'reconnecting', 'end'])
    cluster.on(down, () => {
      if (wasReady) cluster.options.enableOfflineQueue = false;
    });
}

/**
 * Another connection (or cluster client) like `client`, for blocking reads or pub/sub: ioredis's
 * `Cluster.duplicate` takes startup nodes first and options nested under `redisOptions`. Its
 * errors are heard and dropped here, once: the main connection reports outages, and what the
 * duplicate was doing fails (a read, a subscription) for its caller to retry.
 */
export function duplicateClient<T extends RedisClient>(client: T, name: string, options: { autoResubscribe?: boolean } = {}): T {
  let duplicate: RedisClient;
  if (client instanceof Cluster) {
    duplicate = client.duplicate([], { redisOptions: { ...client.options.redisOptions, connectionName: name, ...options } });
    queueOnlyUntilReady(duplicate);
  } else {
    duplicate = (client as Redis).duplicate({ connectionName: name, ...options });
  }
  duplicate.on('error', () => undefined);
  return duplicate as T;
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
 * `agentroom_redis_up{service=name}` follows the client's state: 1 while it is ready, 0 from the
 * moment its connection closes (reconnecting, or quit) until it is ready again. A cluster client
 * closes once it has lost every node it was connected to; one master lost shows in its commands' 503s
 * (docs/decisions.md §52).
 */
function reportReadiness(redis: RedisClient, name: string): void {
  const up = redisUp.labels(name);
  up.set(redis.status === 'ready' ? 1 : 0);
  redis.on('ready', () => up.set(1));
  for (const down of ['close', 'end']) redis.on(down, () => up.set(0));
}

/**
 * Connects and checks that Redis answers, and is 7.0 or newer, so a service with a wrong REDIS_URL
 * refuses to start with one line that says what is wrong (nothing listens, the password is refused,
 * the server is too old…) and what to do, instead of failing its first requests. Nothing is logged
 * until the first answer.
 */
export async function openRedis(url: string, name: string, log?: Logger, options: OpenRedisOptions = {}): Promise<RedisClient> {
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
  let replicas = 0;
  let tooOld: string | undefined;
  try {
    await redis.ping();
    // A Redis whose ACL refuses INFO does not say its version: it is taken at its word.
    tooOld = redisVersionProblem(url, await redis.info('server').catch(() => ''));
    if (options.replicaWait) replicas = options.replicaWait.replicas ?? ((await hasReplicas(redis)) ? 1 : 0);
  } catch (error) {
    redis.disconnect(); // `remember` stays: a late error event of this connection must not go unhandled
    throw new StartupError(redisProblem(url, connectionError ?? (error as Error)));
  }
  if (tooOld !== undefined) {
    redis.disconnect();
    throw new StartupError(tooOld);
  }
  redis.off('error', remember);
  reportConnectionTrouble(redis, name, log);
  reportReadiness(redis, name);
  if (options.replicaWait && replicas > 0) {
    replicaWaits.set(redis, new ReplicaWait(replicas, options.replicaWait.timeoutMs, name, log));
    log?.info(
      { replicas, timeoutMs: options.replicaWait.timeoutMs },
      `a post or message is acknowledged once ${replicas} replica${replicas === 1 ? ' has' : 's have'} it (REDIS_WAIT_REPLICAS)`,
    );
  }
  return redis;
}

export interface OpenRedisOptions {
  /**
   * Makes {@link LuaScript.runAcknowledged} on this client wait for replicas (docs/decisions.md §20):
   * `replicas` each (unset: 1 when the Redis has replicas, else 0, so no wait), at most `timeoutMs`.
   */
  replicaWait?: { replicas?: number | undefined; timeoutMs: number };
}

/**
 * Whether the Redis has replicas: on a cluster, any node `CLUSTER NODES` lists as a replica (one
 * that is down counts too, since it comes back); on one server, a connected replica.
 */
async function hasReplicas(redis: RedisClient): Promise<boolean> {
  if (!(redis instanceof Cluster)) return /connected_slaves:[1-9]/.test(await redis.info('replication'));
  const nodes = String(await redis.cluster('NODES'))
    .trim()
    .split('\n');
  return nodes.some((line) => line.split(' ')[2]?.split(',').includes('slave'));
}

/**
 * While replicas do not acknowledge (a master whose replica is down, or just failed over), writes
 * stop waiting for them, and one write in this long tries again: a WAIT blocks its connection, so
 * each write waiting out its timeout would hold up every command of the process on that master.
 */
const RECHECK_MS = 2_000;

/** How long a write waits for replicas, and what it does when they do not answer in time. */
class ReplicaWait {
  private short = false;
  private recheckAt = 0;
  /** A write that came through a failover is finding out whether the new master has replicas. */
  probing = false;

  constructor(
    readonly replicas: number,
    readonly timeoutMs: number,
    private readonly service: string,
    private readonly log: Logger | undefined,
  ) {}

  /** Whether the next write waits: every one while replicas acknowledge, else one in RECHECK_MS. */
  shouldWait(): boolean {
    if (!this.short) return true;
    const now = Date.now();
    if (now < this.recheckAt) return false;
    this.recheckAt = now + RECHECK_MS;
    return true;
  }

  /**
   * A write that fewer replicas than asked acknowledged in time is still answered (docs/decisions.md
   * §20): its master has it, as every write had before replicas were waited for. It is counted, and
   * logged once until replicas acknowledge again.
   */
  answered(replicas: number): void {
    if (replicas >= this.replicas) {
      if (this.short) this.log?.info({ replicas }, 'replicas acknowledge writes again');
      this.short = false;
      return;
    }
    if (!this.short)
      this.log?.warn(
        { replicas, wanted: this.replicas, timeoutMs: this.timeoutMs, recheckMs: RECHECK_MS },
        'a write was acknowledged by fewer replicas than asked within REDIS_WAIT_TIMEOUT_MS; answering it anyway (its master has it), and waiting for replicas again once they answer',
      );
    this.short = true;
    this.recheckAt = Date.now() + RECHECK_MS;
    this.skipped();
  }

  /** A write answered without a replica's acknowledgement. */
  skipped(): void {
    unreplicatedWrites.inc({ service: this.service });
  }
}

const replicaWaits = new WeakMap<RedisClient, ReplicaWait>();

/** The host and port of a Redis URL, for a message (the URL without its password when it does not parse). */
function whereOf(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || '6379'}`;
  } catch {
    return withoutPassword(url);
  }
}

/** The oldest Redis whose commands the stores use: `PEXPIRE … NX` and `GT` came with 7.0. */
export const REDIS_MAJOR_MIN = 7;

/**
 * What is wrong with the Redis at `url` whose `INFO server` answer is `info`, in one line, or
 * undefined when it is recent enough (or does not say, as some proxies do not).
 */
export function redisVersionProblem(url: string, info: string): string | undefined {
  const version = /^redis_version:(\S+)/m.exec(info)?.[1];
  if (version === undefined || Number(version.split('.')[0]) >= REDIS_MAJOR_MIN) return undefined;
  return `Redis at ${whereOf(url)} (REDIS_URL=${withoutPassword(url)}) is version ${version}; Agent Room needs Redis ${REDIS_MAJOR_MIN}.0 or newer: upgrade it, point REDIS_URL at a newer one, or unset REDIS_URL for in-memory storage`;
}

/** What went wrong reaching the Redis at `url`, and what to do, in one line. */
export function redisProblem(url: string, error: Error): string {
  const shown = withoutPassword(url);
  const { code } = error as NodeJS.ErrnoException;
  const message = error.message.split('\n')[0] ?? '';
  const where = whereOf(url);
  if (code === 'ECONNREFUSED')
    return `nothing listens at ${where} (REDIS_URL=${shown}): start Redis there, point REDIS_URL at a running one, or unset REDIS_URL for in-memory storage`;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `the host of REDIS_URL=${shown} is not found: fix REDIS_URL or unset it for in-memory storage`;
  if (code === 'ETIMEDOUT')
    return `Redis at ${where} (REDIS_URL=${shown}) did not answer in time: check the address, a firewall, and rediss:// (TLS) against redis:// (plain)`;
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

// On a Redis Cluster also: a master down and not replaced yet (CLUSTERDOWN), a command out of
// retries and redirects while the cluster fails over, the whole cluster unreachable, a slot in
// migration (TRYAGAIN), a restarted node still loading its data (LOADING).
const UNAVAILABLE =
  /Connection is closed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|connect ETIMEDOUT|Stream isn't writeable|Command aborted due to connection close|^CLUSTERDOWN|^TRYAGAIN|^LOADING|^Too many Cluster redirections|^Cluster isn't ready|^None of startup nodes is available|^Failed to refresh slots cache/;

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

  /**
   * Runs the script as {@link run} and, when the client was opened with a replica wait, answers
   * once that many replicas have its write, or once the wait's timeout has passed without them
   * (docs/decisions.md §20: the write is answered all the same, and counted). `WAIT` is sent in one
   * pipeline with the script, so it reaches the master that took the write, on the same connection
   * (on a cluster, ioredis sends a pipeline whose keys share a slot to that slot's master).
   */
  async runAcknowledged(redis: RedisClient, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    const wait = replicaWaits.get(redis);
    if (wait === undefined) return this.run(redis, keys, args);
    if (!wait.shouldWait()) {
      const result = await this.run(redis, keys, args);
      wait.skipped();
      return result;
    }
    let replies = await redis
      .pipeline()
      .evalsha(this.sha, keys.length, ...keys, ...args)
      .wait(wait.replicas, wait.timeoutMs)
      .exec();
    if (replies?.[0]?.[0]?.message.startsWith('NOSCRIPT')) {
      replies = await redis
        .pipeline()
        .eval(this.source, keys.length, ...keys, ...args)
        .wait(wait.replicas, wait.timeoutMs)
        .exec();
    }
    let [written, waited] = replies ?? [];
    if (!written || !waited) throw new Error('a pipeline answered fewer replies than it sent commands');
    if (written[0] && /^(MOVED|ASK|CLUSTERDOWN|TRYAGAIN) /.test(written[0].message)) {
      // The write was refused, not done: the slot lives elsewhere now, or the cluster is failing
      // over. ioredis retries and follows redirects (learning the new slot map) for single
      // commands, but not for a pipeline whose WAIT succeeded. So the script goes alone, then WAIT
      // with a read of the same slot, which sends it to the master that has just taken the write,
      // over the same connection.
      written = [null, await this.run(redis, keys, args)];
      // After a failover the new master often has no replica yet, and every write that waited
      // through the failover would now wait out the timeout, one after another on the
      // connection: one of them finds out, and the others are answered without waiting (counted).
      if (wait.probing || !wait.shouldWait()) {
        wait.skipped();
        return written[1];
      }
      wait.probing = true;
      try {
        waited = await this.waitAfterRedirect(redis, keys[0] ?? '', wait);
      } finally {
        wait.probing = false;
      }
    }
    if (written[0]) throw written[0];
    if (waited[0]) throw waited[0];
    wait.answered(Number(waited[1]));
    return written[1];
  }

  /**
   * WAIT on the master of `key`'s slot, sent with a read of `key` so that it goes there. When that
   * read is redirected too (ioredis's slot map, refreshed from another node, may lag a failover for
   * a moment), a single command learns the new master and the pair goes again.
   */
  private async waitAfterRedirect(redis: RedisClient, key: string, wait: ReplicaWait): Promise<[Error | null, unknown]> {
    for (let attempt = 1; ; attempt += 1) {
      const [read, waited] = (await redis.pipeline().exists(key).wait(wait.replicas, wait.timeoutMs).exec()) ?? [];
      if (!read || !waited) return [new Error('a pipeline answered fewer replies than it sent commands'), null];
      if (!read[0]) return waited;
      if (attempt === 3 || !/^(MOVED|ASK) /.test(read[0].message)) return [read[0], null];
      await redis.exists(key);
    }
  }
}
