import { type Clock, systemClock } from './clock.js';
import { Keyspace, type RedisClient } from './redis.js';

/**
 * What a finished call left to replay: any JSON value its caller chose (edge keeps an operation's
 * result object; auth's pages keep an HTTP answer). The store neither reads nor shapes it.
 */
export type StoredResult = unknown;

export type IdempotencyRecord =
  | { state: 'running'; fingerprint: string }
  | { state: 'done'; fingerprint: string; result: StoredResult };

export type BeginResult =
  | { outcome: 'started' }
  | { outcome: 'running' }
  | { outcome: 'mismatch' }
  | { outcome: 'replay'; result: StoredResult };

/** How long answers are remembered (docs/decisions.md §6). */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/** A request that crashed without finishing frees its key after this long. */
export const IDEMPOTENCY_RUNNING_TTL_MS = 60 * 1000;

/**
 * Idempotency records: the first request with a key claims it atomically; repeats see it running,
 * replay its answer, or learn the key was used with another body.
 */
export interface IdempotencyStore {
  begin(key: string, fingerprint: string): Promise<BeginResult>;
  complete(key: string, fingerprint: string, result: StoredResult): Promise<void>;
  /** Forgets a key whose call failed, so a retry can succeed. */
  abandon(key: string): Promise<void>;
}

function classify(record: IdempotencyRecord, fingerprint: string): BeginResult {
  if (record.fingerprint !== fingerprint) return { outcome: 'mismatch' };
  return record.state === 'running' ? { outcome: 'running' } : { outcome: 'replay', result: record.result };
}

export class MemoryIdempotencyStore implements IdempotencyStore {
  private readonly records = new Map<string, { record: IdempotencyRecord; expiresAt: number }>();

  constructor(private readonly clock: Clock = systemClock) {}

  private sweep(now: number): void {
    // Bounded by a day of keys: expired ones go whenever a new key is claimed.
    for (const [key, entry] of this.records) if (entry.expiresAt <= now) this.records.delete(key);
  }

  begin(key: string, fingerprint: string): Promise<BeginResult> {
    const now = this.clock.now();
    const entry = this.records.get(key);
    if (entry && entry.expiresAt > now) return Promise.resolve(classify(entry.record, fingerprint));
    this.sweep(now);
    this.records.set(key, { record: { state: 'running', fingerprint }, expiresAt: now + IDEMPOTENCY_RUNNING_TTL_MS });
    return Promise.resolve({ outcome: 'started' });
  }

  complete(key: string, fingerprint: string, result: StoredResult): Promise<void> {
    this.records.set(key, { record: { state: 'done', fingerprint, result }, expiresAt: this.clock.now() + IDEMPOTENCY_TTL_MS });
    return Promise.resolve();
  }

  abandon(key: string): Promise<void> {
    this.records.delete(key);
    return Promise.resolve();
  }
}

export class RedisIdempotencyStore implements IdempotencyStore {
  private readonly keys: Keyspace;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.keys = new Keyspace(prefix, 'idem');
  }

  private keyOf(key: string): string {
    return this.keys.key(key);
  }

  async begin(key: string, fingerprint: string): Promise<BeginResult> {
    const redisKey = this.keyOf(key);
    const running: IdempotencyRecord = { state: 'running', fingerprint };
    // Two tries: the record may vanish between SET NX and GET (a 5xx abandoned it).
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const claimed = await this.redis.set(redisKey, JSON.stringify(running), 'PX', IDEMPOTENCY_RUNNING_TTL_MS, 'NX');
      if (claimed === 'OK') return { outcome: 'started' };
      const json = await this.redis.get(redisKey);
      if (json !== null) return classify(JSON.parse(json) as IdempotencyRecord, fingerprint);
    }
    return { outcome: 'running' };
  }

  async complete(key: string, fingerprint: string, result: StoredResult): Promise<void> {
    const record: IdempotencyRecord = { state: 'done', fingerprint, result };
    await this.redis.set(this.keyOf(key), JSON.stringify(record), 'PX', IDEMPOTENCY_TTL_MS);
  }

  async abandon(key: string): Promise<void> {
    await this.redis.del(this.keyOf(key));
  }
}
