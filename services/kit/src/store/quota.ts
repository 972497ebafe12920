import { type Clock, nextUtcMidnight, systemClock, utcDay } from './clock.js';
import { Keyspace, LuaScript, type RedisClient } from './redis.js';

/** The quota after one call was counted. */
export interface QuotaState {
  limit: number;
  /** Calls left today, never negative. */
  remaining: number;
  /** Seconds until the counter resets at the next UTC midnight. */
  resetSeconds: number;
  /** False when this call went over the limit. */
  allowed: boolean;
}

/** Daily call quotas, one counter per subject (a token, or a client address) per UTC day. */
export interface QuotaStore {
  /** Counts one call for `subject` and says whether it fits in `limit`. Exact under concurrency. */
  consume(subject: string, limit: number): Promise<QuotaState>;
}

/** The quota after the `count`th call of the day, at `now`. */
export function quotaStateOf(count: number, limit: number, now: number): QuotaState {
  return {
    limit,
    remaining: Math.max(0, limit - count),
    resetSeconds: Math.max(1, Math.ceil((nextUtcMidnight(now) - now) / 1000)),
    allowed: count <= limit,
  };
}

/** The embedded default: counters in this process, dropped at midnight UTC. */
export class MemoryQuotaStore implements QuotaStore {
  private readonly counters = new Map<string, number>();
  private day = '';

  constructor(private readonly clock: Clock = systemClock) {}

  consume(subject: string, limit: number): Promise<QuotaState> {
    const now = this.clock.now();
    const today = utcDay(now);
    if (today !== this.day) {
      // Yesterday's counters are all expired at once, so memory stays bounded by one day of subjects.
      this.counters.clear();
      this.day = today;
    }
    const count = (this.counters.get(subject) ?? 0) + 1;
    this.counters.set(subject, count);
    return Promise.resolve(quotaStateOf(count, limit, now));
  }
}

/**
 * Counts one call on the counter `KEYS[1]`, which expires at `ARGV[1]` (ms since the epoch), into
 * `count`: INCR and PEXPIREAT in one script, so a counter can never be left without its expiry.
 * Scripts that do more in the same step (an idempotency claim) start with it.
 */
export const COUNT_CALL_LUA = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIREAT', KEYS[1], ARGV[1]) end`;

const CONSUME = new LuaScript(`${COUNT_CALL_LUA}
return count`);

/** Counters in Redis that expire at the next UTC midnight; INCR keeps them exact across replicas. */
export class RedisQuotaStore implements QuotaStore {
  private readonly keys: Keyspace;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    private readonly clock: Clock = systemClock,
  ) {
    this.keys = new Keyspace(prefix, 'quota');
  }

  async consume(subject: string, limit: number): Promise<QuotaState> {
    const now = this.clock.now();
    const count = Number(await CONSUME.run(this.redis, [this.keys.key(subject, utcDay(now))], [String(nextUtcMidnight(now))]));
    return quotaStateOf(count, limit, now);
  }

  /**
   * Counts one call for `subject` as `consume` does, inside a script that does more in the same
   * round trip: `script` starts with {@link COUNT_CALL_LUA} and answers `count` (or a table whose
   * first item is `count`, the rest answered as `more`). Its own keys and arguments follow the
   * counter's (`KEYS[2]…`, `ARGV[2]…`); keys tagged `{subject}` share the counter's cluster slot.
   */
  async consumeWith(
    subject: string,
    limit: number,
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
  ): Promise<{ quota: QuotaState; more: unknown[] }> {
    const now = this.clock.now();
    const answer = await script.run(this.redis, [this.keys.key(subject, utcDay(now)), ...keys], [String(nextUtcMidnight(now)), ...args]);
    const [count, ...more] = Array.isArray(answer) ? (answer as unknown[]) : [answer];
    return { quota: quotaStateOf(Number(count), limit, now), more };
  }
}
