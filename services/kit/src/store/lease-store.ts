import type { Clock } from './clock.js';
import { COMPARE_STREAM_IDS_LUA, compareStreamIds } from './feed.js';
import type { LeaseStore } from './lease-follower.js';
import { LuaScript, type RedisClient } from './redis.js';

// Take the lease KEYS[1] for ARGV[1] (or extend it) for ARGV[2] ms, unless another owner holds it.
const ACQUIRE_LEASE = new LuaScript(`
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`);

const RELEASE_LEASE = new LuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`);

// The position KEYS[2] moved forward to ARGV[2] (stream ids compared as Redis orders them), only while ARGV[1] holds the lease KEYS[1]: 1, else 0.
const ADVANCE_POSITION = new LuaScript(`${COMPARE_STREAM_IDS_LUA}if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local position = redis.call('GET', KEYS[2])
if not position or compareIds(ARGV[2], position) > 0 then redis.call('SET', KEYS[2], ARGV[2]) end
return 1
`);

/**
 * A {@link LeaseStore} in Redis: the lease and the position under two keys of one slot (the caller
 * gives them one hash tag), the position moved by one script that checks the lease.
 */
export class RedisLeaseStore implements LeaseStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly leaseKey: string,
    private readonly positionKey: string,
  ) {}

  async acquireLease(owner: string, ttlMs: number): Promise<boolean> {
    return Number(await ACQUIRE_LEASE.run(this.redis, [this.leaseKey], [owner, String(ttlMs)])) === 1;
  }

  async releaseLease(owner: string): Promise<void> {
    await RELEASE_LEASE.run(this.redis, [this.leaseKey], [owner]);
  }

  async position(): Promise<string | undefined> {
    return (await this.redis.get(this.positionKey)) ?? undefined;
  }

  async advancePosition(owner: string, id: string): Promise<boolean> {
    return Number(await ADVANCE_POSITION.run(this.redis, [this.leaseKey, this.positionKey], [owner, id])) === 1;
  }
}

/** A {@link LeaseStore} in this process (the embedded default), timed by the store's clock. */
export class MemoryLeaseStore implements LeaseStore {
  private lease: { owner: string; expiresAt: number } | undefined;
  private stored: string | undefined;

  constructor(private readonly clock: Clock) {}

  acquireLease(owner: string, ttlMs: number): Promise<boolean> {
    const now = this.clock.now();
    if (this.lease && this.lease.owner !== owner && this.lease.expiresAt > now) return Promise.resolve(false);
    this.lease = { owner, expiresAt: now + ttlMs };
    return Promise.resolve(true);
  }

  releaseLease(owner: string): Promise<void> {
    if (this.lease?.owner === owner) this.lease = undefined;
    return Promise.resolve();
  }

  position(): Promise<string | undefined> {
    return Promise.resolve(this.stored);
  }

  advancePosition(owner: string, id: string): Promise<boolean> {
    if (this.lease?.owner !== owner || this.lease.expiresAt <= this.clock.now()) return Promise.resolve(false);
    if (this.stored === undefined || compareStreamIds(id, this.stored) > 0) this.stored = id;
    return Promise.resolve(true);
  }
}
