import { createHash } from 'node:crypto';
import { IDEMPOTENCY_KEY_HOURS } from '../limits.js';
import { type Clock, systemClock } from './clock.js';
import { COUNT_CALL_LUA, type QuotaState, type RedisQuotaStore } from './quota.js';
import { Keyspace, LuaScript, type RedisClient } from './redis.js';

/**
 * What a finished call left to replay: any JSON value its caller chose (edge keeps an operation's
 * result object; auth's pages keep an HTTP answer). Both stores keep it as JSON text, so a replay
 * is that value as JSON carries it, a new object each time; they neither read nor shape it.
 */
export type StoredResult = unknown;

export type IdempotencyRecord =
  // `since`: when the claim was made (ms since the epoch); absent in records kept before it was.
  { state: 'running'; fingerprint: string; since?: number } | { state: 'done'; fingerprint: string; result: StoredResult };

export type BeginResult =
  | { outcome: 'started' }
  /** `since`: when the running call claimed the key, if known (for a caller that may take over a dead one's call). */
  | { outcome: 'running'; since?: number }
  | { outcome: 'mismatch' }
  | { outcome: 'replay'; result: StoredResult };

/** How long answers are remembered (docs/decisions.md §6). */
export const IDEMPOTENCY_TTL_MS = IDEMPOTENCY_KEY_HOURS * 3600 * 1000;
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
  if (record.state === 'done') return { outcome: 'replay', result: record.result };
  return record.since === undefined ? { outcome: 'running' } : { outcome: 'running', since: record.since };
}

/** The most answers the memory store keeps (docs/decisions.md §19): past it, the oldest go first, before their day is up. */
export const MEMORY_IDEMPOTENCY_KEYS_MAX = 100_000;

/**
 * SHA-256 of `text` as 32 one-byte characters (Node's 'binary' is latin1): how the memory store
 * keeps keys and fingerprints. Callers' keys are long (subject, operation, the hash of the client's
 * key) and often built in pieces that V8 keeps as a tree of strings; a day of them is most of the
 * store's memory.
 */
function digest(text: string): string {
  return createHash('sha256').update(text).digest('binary');
}

const DIGEST_LENGTH = 32;

/**
 * A finished call's record: the digest of its fingerprint, then its answer as JSON, as ONE flat
 * string. `+` (or a template) would make a tree of the two pieces, and reading it flattens the
 * tree in place but keeps it: a day of answers would each hold the tree's node and the digest
 * beside the flat copy (about 80 bytes an answer). A join writes the characters once.
 */
function doneRecord(print: string, json: string): string {
  return [print, json].join('');
}

/**
 * Keys in the order they expire, each with the record it was queued for (if any). Every record of
 * one kind lives equally long (a running claim a minute, an answer a day), so a queue per kind,
 * appended as records are written, is already in time order: expiring is taking from the front,
 * never a scan of every key. Plain arrays rather than an object per entry: a day of answers is a
 * lot of entries.
 */
class ExpiryQueue<R> {
  private keys: string[] = [];
  private times: number[] = [];
  /** Emptied as entries are taken, so a record taken is not held on until the front is cut off. */
  private records: (R | undefined)[] = [];
  private head = 0;

  push(key: string, expiresAt: number, record: R): void {
    this.keys.push(key);
    this.times.push(expiresAt);
    this.records.push(record);
  }

  /** Takes the front entry if it is due by `now` (any entry when `now` is Infinity), or answers undefined. */
  take(now: number): { key: string; record: R } | undefined {
    if (this.head >= this.keys.length || (this.times[this.head] as number) > now) return undefined;
    const taken = { key: this.keys[this.head] as string, record: this.records[this.head] as R };
    this.keys[this.head] = '';
    this.records[this.head] = undefined;
    this.head += 1;
    // Drop the taken front once it is most of the arrays, so memory follows the live keys.
    if (this.head > 1_024 && this.head * 2 > this.keys.length) {
      this.keys = this.keys.slice(this.head);
      this.times = this.times.slice(this.head);
      this.records = this.records.slice(this.head);
      this.head = 0;
    }
    return taken;
  }
}

/**
 * A claim whose call still runs, for a minute at most, made at `since`; `fingerprint` is a digest.
 * Its queue entry holds only its key: a finished call's claim is garbage at once, not a minute later
 * (a busy minute's worth of claims, about 90 bytes each).
 */
interface RunningClaim {
  fingerprint: string;
  since: number;
}

export interface MemoryIdempotencyOptions {
  /** The most answers kept; the oldest go first. {@link MEMORY_IDEMPOTENCY_KEYS_MAX} by default. */
  maxKeys?: number;
}

/**
 * Idempotency records in this process's memory. A finished call's record is one string: the digest
 * of its fingerprint, then its answer as JSON, as Redis keeps it (a replay is parsed from it, a new
 * object each time, whatever the caller did with the first). So a day of answers holds no object
 * graph, nor anything serialised for one elsewhere; at most `maxKeys` of them are kept.
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  /** By the digest of each key: a running claim, or a finished call's record. */
  private readonly records = new Map<string, RunningClaim | string>();
  private readonly running = new ExpiryQueue<undefined>();
  private readonly done = new ExpiryQueue<string>();
  private readonly maxKeys: number;

  constructor(
    private readonly clock: Clock = systemClock,
    options: MemoryIdempotencyOptions = {},
  ) {
    this.maxKeys = options.maxKeys ?? MEMORY_IDEMPOTENCY_KEYS_MAX;
  }

  /** How many keys are held (expired ones go as new keys are claimed). */
  get size(): number {
    return this.records.size;
  }

  /**
   * Forgets what has expired, from the front of each queue, then the oldest answers beyond
   * `maxKeys`: the work is the number of keys that go, however many are held. Afterwards every
   * record held is live.
   */
  private sweep(now: number): void {
    for (let due = this.running.take(now); due !== undefined; due = this.running.take(now)) {
      // Only a claim still running since then: one finished, abandoned or claimed again since stays.
      const record = this.records.get(due.key);
      if (typeof record === 'object' && record.since + IDEMPOTENCY_RUNNING_TTL_MS <= now) this.records.delete(due.key);
    }
    for (let due = this.done.take(now); due !== undefined; due = this.done.take(now)) this.forget(due.key, due.record);
    while (this.records.size > this.maxKeys) {
      const oldest = this.done.take(Infinity);
      if (oldest === undefined) break;
      this.forget(oldest.key, oldest.record);
    }
  }

  /** Forgets `key` if it still holds `record`: a key rewritten since (completed, abandoned, claimed again) keeps its new record. */
  private forget(key: string, record: string): void {
    if (this.records.get(key) === record) this.records.delete(key);
  }

  begin(key: string, fingerprint: string): Promise<BeginResult> {
    const now = this.clock.now();
    this.sweep(now);
    const at = digest(key);
    const print = digest(fingerprint);
    const record = this.records.get(at);
    if (typeof record === 'string') {
      if (!record.startsWith(print)) return Promise.resolve({ outcome: 'mismatch' });
      return Promise.resolve({ outcome: 'replay', result: JSON.parse(record.slice(DIGEST_LENGTH)) as StoredResult });
    }
    if (record) return Promise.resolve(record.fingerprint === print ? { outcome: 'running', since: record.since } : { outcome: 'mismatch' });
    const claim: RunningClaim = { fingerprint: print, since: now };
    this.records.set(at, claim);
    this.running.push(at, now + IDEMPOTENCY_RUNNING_TTL_MS, undefined);
    return Promise.resolve({ outcome: 'started' });
  }

  complete(key: string, fingerprint: string, result: StoredResult): Promise<void> {
    const at = digest(key);
    const record = doneRecord(digest(fingerprint), JSON.stringify(result));
    // Deleted first, so the map keeps this key's string, the one queued: `set` on a key held would
    // keep the claim's, and each answer would hold two copies of its key for a day.
    this.records.delete(at);
    this.records.set(at, record);
    this.done.push(at, this.clock.now() + IDEMPOTENCY_TTL_MS, record);
    return Promise.resolve();
  }

  abandon(key: string): Promise<void> {
    this.records.delete(digest(key));
    return Promise.resolve();
  }
}

/**
 * An idempotency key kept beside `subject`'s quota counter. In Redis it carries `subject` as its
 * hash tag, so it lives in the counter's cluster slot and one script can count a call and claim the
 * key ({@link RedisIdempotencyStore.consumeAndBegin}); in memory it is a key like any other.
 */
export function keyBesideQuota(subject: string, key: string): string {
  return `{${subject}}:${key}`;
}

/** A call counted against its quota and, when it fitted, its key claimed. */
export interface CountedClaim {
  quota: QuotaState;
  /** What claiming the key found; absent when the call went over its quota, which claims nothing. */
  begun?: BeginResult;
}

// The call is counted first, and only a call within its quota (ARGV[2]) claims its key: SET NX of
// the running record (ARGV[3], for ARGV[4] ms), or else what holds the key now. One script, so
// nothing can come between the count and the claim, or between a failed SET NX and its GET.
const COUNT_AND_BEGIN = new LuaScript(`${COUNT_CALL_LUA}
if count > tonumber(ARGV[2]) then return {count} end
if redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4], 'NX') then return {count, 1} end
return {count, 0, redis.call('GET', KEYS[2])}`);

export class RedisIdempotencyStore implements IdempotencyStore {
  private readonly keys: Keyspace;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.keys = new Keyspace(prefix, 'idem');
  }

  /** A key that starts with its own hash tag ({@link keyBesideQuota}) keeps it; any other is tagged whole. */
  private keyOf(key: string): string {
    return key.startsWith('{') ? `${this.keys.prefix}:${this.keys.owner}:${key}` : this.keys.key(key);
  }

  /**
   * Counts one call for `subject` on `quota` (which must use the same Redis) and, when it fits in
   * `limit`, begins `key` as `begin` does, in one script: a write's first two steps in one round
   * trip instead of two. `key` comes from `keyBesideQuota(subject, …)`, so on Redis Cluster both
   * keys are in one slot.
   */
  async consumeAndBegin(quota: RedisQuotaStore, subject: string, limit: number, key: string, fingerprint: string): Promise<CountedClaim> {
    const running: IdempotencyRecord = { state: 'running', fingerprint, since: Date.now() };
    const counted = await quota.consumeWith(
      subject,
      limit,
      COUNT_AND_BEGIN,
      [this.keyOf(key)],
      [String(limit), JSON.stringify(running), String(IDEMPOTENCY_RUNNING_TTL_MS)],
    );
    const [claimed, held] = counted.more;
    if (claimed === undefined) return { quota: counted.quota };
    if (Number(claimed) === 1) return { quota: counted.quota, begun: { outcome: 'started' } };
    return { quota: counted.quota, begun: typeof held === 'string' ? classify(JSON.parse(held) as IdempotencyRecord, fingerprint) : { outcome: 'running' } };
  }

  async begin(key: string, fingerprint: string): Promise<BeginResult> {
    const redisKey = this.keyOf(key);
    const running: IdempotencyRecord = { state: 'running', fingerprint, since: Date.now() };
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
