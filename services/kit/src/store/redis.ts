import { Redis } from 'ioredis';
import type { Logger } from '../log.js';

export { Redis } from 'ioredis';

/**
 * Opens a Redis connection the way every service does.
 * RESP2 on purpose: ioredis 6 defaults to RESP3, and our stream code (XRANGE/XREAD replies) is
 * written for RESP2's nested arrays; the store contract tests pin this down.
 */
export function connectRedis(url: string, name: string, log?: Logger): Redis {
  const redis = new Redis(url, {
    protocol: 2,
    connectionName: name,
    // Fail a command after two reconnect attempts instead of queueing it forever: callers answer 503.
    maxRetriesPerRequest: 2,
    connectTimeout: 2_000,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2_000),
  });
  // Connection trouble is reported once per state change; commands fail on their own and answer 503.
  let reported = false;
  redis.on('error', (error: Error) => {
    if (!reported) log?.warn({ err: error, connection: name }, 'Redis connection failed; retrying');
    reported = true;
  });
  redis.on('ready', () => {
    if (reported) log?.info({ connection: name }, 'Redis connection restored');
    reported = false;
  });
  return redis;
}

/**
 * Connects and checks that Redis answers, so a service with a wrong REDIS_URL refuses to start
 * with a readable message instead of failing its first requests.
 */
export async function openRedis(url: string, name: string, log?: Logger): Promise<Redis> {
  const redis = connectRedis(url, name, log);
  try {
    await redis.ping();
  } catch (error) {
    redis.disconnect();
    throw new Error(`${name}: Redis at REDIS_URL does not answer (${(error as Error).message})`);
  }
  return redis;
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
