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

function stateOf(count: number, limit: number, now: number): QuotaState {
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
    return Promise.resolve(stateOf(count, limit, now));
  }
}

// INCR and EXPIREAT in one script: a counter can never be left without its expiry.
const CONSUME = new LuaScript(`
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIREAT', KEYS[1], ARGV[1]) end
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
    const key = this.keys.key(subject, utcDay(now));
    const count = Number(await CONSUME.run(this.redis, [key], [String(nextUtcMidnight(now))]));
    return stateOf(count, limit, now);
  }
}
