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

/**
 * Keys in the order they expire. Every record of one kind lives equally long (a running claim a
 * minute, an answer a day), so a queue per kind, appended as records are written, is already in
 * time order: expiring is taking from the front, never a scan of every key.
 */
class ExpiryQueue {
  private items: { key: string; expiresAt: number }[] = [];
  private head = 0;

  push(key: string, expiresAt: number): void {
    this.items.push({ key, expiresAt });
  }

  /** Takes every entry due by `now`, oldest first. */
  *due(now: number): Generator<{ key: string; expiresAt: number }> {
    while (this.head < this.items.length) {
      const item = this.items[this.head] as { key: string; expiresAt: number };
      if (item.expiresAt > now) break;
      this.head += 1;
      yield item;
    }
    // Drop the taken front once it is most of the array, so memory follows the live keys.
    if (this.head > 1_024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }
}

export class MemoryIdempotencyStore implements IdempotencyStore {
  private readonly records = new Map<string, { record: IdempotencyRecord; expiresAt: number }>();
  private readonly running = new ExpiryQueue();
  private readonly done = new ExpiryQueue();

  constructor(private readonly clock: Clock = systemClock) {}

  /** How many keys are held (expired ones go as new keys are claimed). */
  get size(): number {
    return this.records.size;
  }

  /**
   * Forgets what has expired, from the front of each queue: the work is the number of keys that
   * expire, however many are held. A queue entry whose key was rewritten since (completed,
   * abandoned, claimed again) no longer matches the record and is skipped.
   */
  private sweep(now: number): void {
    for (const queue of [this.running, this.done]) {
      for (const { key, expiresAt } of queue.due(now)) {
        if (this.records.get(key)?.expiresAt === expiresAt) this.records.delete(key);
      }
    }
  }

  begin(key: string, fingerprint: string): Promise<BeginResult> {
    const now = this.clock.now();
    const entry = this.records.get(key);
    if (entry && entry.expiresAt > now) return Promise.resolve(classify(entry.record, fingerprint));
    this.sweep(now);
    const expiresAt = now + IDEMPOTENCY_RUNNING_TTL_MS;
    this.records.set(key, { record: { state: 'running', fingerprint }, expiresAt });
    this.running.push(key, expiresAt);
    return Promise.resolve({ outcome: 'started' });
  }

  complete(key: string, fingerprint: string, result: StoredResult): Promise<void> {
    const expiresAt = this.clock.now() + IDEMPOTENCY_TTL_MS;
    this.records.set(key, { record: { state: 'done', fingerprint, result }, expiresAt });
    this.done.push(key, expiresAt);
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
