import { type Clock, type Cluster, connectRedis, connectRedisCluster, type LocalRedis, type LocalRedisCluster, type Redis, startRedisCluster, startRedisServer } from '@agentroom/kit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { DeviceFlow, Human, Session, TokenRecord } from '../src/records.js';
import type { AuthStore } from '../src/store.js';
import { MemoryAuthStore } from '../src/store-memory.js';
import { RedisAuthStore } from '../src/store-redis.js';

let redisServer: LocalRedis;
let redis: Redis;
/** One three-master Redis Cluster for the whole file: it takes about two seconds to start. */
let cluster: LocalRedisCluster;
let clusterClient: Cluster;
let prefixes = 0;

beforeAll(async () => {
  [redisServer, cluster] = await Promise.all([startRedisServer(), startRedisCluster()]);
  redis = connectRedis(redisServer.url, 'auth-store-test');
  clusterClient = connectRedisCluster(cluster.nodes, 'auth-store-test');
});

afterAll(async () => {
  await redis.quit();
  await redisServer.stop();
  await clusterClient.quit();
  await cluster.stop();
});

/** Time as both stores read it; the tests move it. */
let time: number;
const clock: Clock = { now: () => time };

beforeEach(() => {
  time = Date.parse('2026-11-22T12:00:00Z');
});

const implementations: [string, () => AuthStore][] = [
  ['memory', () => new MemoryAuthStore(clock)],
  ['redis', () => new RedisAuthStore(redis, `as${(prefixes += 1)}`, clock)],
  ['redis cluster', () => new RedisAuthStore(clusterClient, `as${(prefixes += 1)}`, clock)],
];

let flows = 0;

function flow(overrides: Partial<DeviceFlow> = {}): DeviceFlow {
  flows += 1;
  return {
    deviceHash: `device${flows}`,
    userCode: `BCDFGH${'JKLMNPQRSTVWXZ'[flows % 14]}${'JKLMNPQRSTVWXZ'[Math.floor(flows / 14) % 14]}`,
    scopes: ['posts:write'],
    agentName: 'scout',
    createdAt: time,
    expiresAt: time + 900_000,
    retainUntil: time + 4_500_000,
    status: 'pending',
    ...overrides,
  };
}

function token(overrides: Partial<TokenRecord> = {}): TokenRecord {
  return {
    id: `tok_${Math.random().toString(36).slice(2)}`,
    hash: `h${Math.random()}`,
    agentId: 'a_agent0001',
    agentName: 'scout',
    humanId: 'h_ada',
    humanLabel: 'Ada',
    scopes: ['posts:write'],
    createdAt: time,
    expiresAt: time + 86_400_000,
    ...overrides,
  };
}

describe.each(implementations)('AuthStore contract: %s', (name, makeStore) => {
  let store: AuthStore;

  beforeEach(() => {
    store = makeStore();
  });

  describe('device flows', () => {
    it('keeps a flow by device hash and by user code, and forgets both on delete', async () => {
      const f = flow();
      expect(await store.createFlow(f)).toBe(true);
      expect(await store.flowByDevice(f.deviceHash)).toEqual(f);
      expect(await store.flowByUserCode(f.userCode)).toEqual(f);
      await store.deleteFlow(f);
      expect(await store.flowByDevice(f.deviceHash)).toBeUndefined();
      expect(await store.flowByUserCode(f.userCode)).toBeUndefined();
    });

    it('refuses a second flow with a user code that is held, and stores nothing of it', async () => {
      const first = flow();
      const clash = flow({ userCode: first.userCode });
      expect(await store.createFlow(first)).toBe(true);
      expect(await store.createFlow(clash)).toBe(false);
      expect(await store.flowByDevice(clash.deviceHash)).toBeUndefined();
      expect((await store.flowByUserCode(first.userCode))?.deviceHash).toBe(first.deviceHash);
    });

    it('moves a flow on only from the status it is in', async () => {
      const f = flow();
      await store.createFlow(f);
      expect(await store.transitionFlow('approving', { ...f, status: 'approved' })).toBe(false);
      expect(await store.transitionFlow('pending', { ...f, status: 'declined' })).toBe(true);
      expect((await store.flowByUserCode(f.userCode))?.status).toBe('declined');
      expect(await store.transitionFlow('pending', { ...f, status: 'approving' })).toBe(false);
      expect(await store.transitionFlow('pending', flow())).toBe(false);
    });

    it('lets exactly one of 20 concurrent transitions from pending win', async () => {
      const f = flow();
      await store.createFlow(f);
      const won = await Promise.all(Array.from({ length: 20 }, () => store.transitionFlow('pending', { ...f, status: 'approving' })));
      expect(won.filter(Boolean)).toHaveLength(1);
    });

    it('hands a flow to exactly one of 20 concurrent takers, and forgets its user code', async () => {
      const f = flow({ status: 'approved' });
      await store.createFlow(f);
      const taken = await Promise.all(Array.from({ length: 20 }, () => store.takeFlow(f.deviceHash)));
      expect(taken.filter(Boolean)).toEqual([f]);
      expect(await store.flowByUserCode(f.userCode)).toBeUndefined();
    });

    it('admits one poll per interval on its clock and says how long to wait', async () => {
      const f = flow();
      await store.createFlow(f);
      expect(await store.admitPoll(f, 3_000)).toBe(0);
      time += 1_000;
      expect(await store.admitPoll(f, 3_000)).toBe(2_000);
      time += 1_999;
      expect(await store.admitPoll(f, 3_000)).toBe(1);
      time += 1;
      expect(await store.admitPoll(f, 3_000)).toBe(0);
      expect(await store.admitPoll(flow(), 3_000)).toBe(0);
    });

    it('admits exactly one of 20 concurrent polls', async () => {
      const f = flow();
      await store.createFlow(f);
      const waits = await Promise.all(Array.from({ length: 20 }, () => store.admitPoll(f, 3_000)));
      expect(waits.filter((wait) => wait === 0)).toHaveLength(1);
    });

    it('starts polling afresh for a flow deleted and recreated', async () => {
      const f = flow();
      await store.createFlow(f);
      await store.admitPoll(f, 3_000);
      await store.deleteFlow(f);
      await store.createFlow(f);
      expect(await store.admitPoll(f, 3_000)).toBe(0);
    });
  });

  describe('tokens', () => {
    it('keeps tokens by hash and id, and lists them per human and per agent, newest first', async () => {
      const older = token({ createdAt: time - 1_000 });
      const newer = token({ agentId: 'a_other0001' });
      await store.saveToken(older, older.expiresAt);
      await store.saveToken(newer, newer.expiresAt);
      expect(await store.tokenByHash(older.hash)).toEqual(older);
      expect(await store.tokenById(newer.id)).toEqual(newer);
      expect((await store.tokensOfHuman('h_ada')).map((t) => t.id)).toEqual([newer.id, older.id]);
      expect((await store.tokensOfAgent('a_agent0001')).map((t) => t.id)).toEqual([older.id]);
      expect(await store.tokensOfHuman('h_nobody')).toEqual([]);
      expect(await store.tokenById('tok_nothing')).toBeUndefined();
    });

    it('records a revocation in place', async () => {
      const t = token();
      await store.saveToken(t, t.expiresAt);
      await store.updateToken({ ...t, revokedAt: time });
      expect((await store.tokenById(t.id))?.revokedAt).toBe(time);
      expect((await store.tokensOfAgent(t.agentId))[0]?.revokedAt).toBe(time);
    });

    it("keeps a provisioned token's mark (the operator's reason and when) in every read, and through its revocation", async () => {
      const approved = token({ createdAt: time - 1_000 });
      const provisioned = token({ agentId: 'a_load0001', provisioned: { reason: 'k6 load test: 200 writers', at: time } });
      await store.saveToken(approved, approved.expiresAt);
      await store.saveToken(provisioned, provisioned.expiresAt);
      expect(await store.tokenByHash(provisioned.hash)).toEqual(provisioned);
      expect(await store.tokenById(provisioned.id)).toEqual(provisioned);
      expect((await store.tokensOfAgent('a_load0001'))[0]?.provisioned).toEqual({ reason: 'k6 load test: 200 writers', at: time });
      const listed = await store.tokensOfHuman('h_ada');
      expect(listed.map((t) => [t.id, t.provisioned?.reason])).toEqual([
        [provisioned.id, 'k6 load test: 200 writers'],
        [approved.id, undefined],
      ]);
      expect(listed[1]).not.toHaveProperty('provisioned');
      await store.updateToken({ ...provisioned, revokedAt: time });
      expect(await store.tokenById(provisioned.id)).toEqual({ ...provisioned, revokedAt: time });
    });
  });

  it('creates humans with names unique regardless of case, whatever characters they hold', async () => {
    const ada: Human = { id: 'h_1', name: 'Ada {Lovelace}: 1815', passwordHash: 'x', createdAt: 1 };
    expect(await store.createHuman(ada)).toBe(true);
    expect(await store.createHuman({ ...ada, id: 'h_2', name: 'ada {lovelace}: 1815' })).toBe(false);
    expect(await store.humanByName('ADA {LOVELACE}: 1815')).toEqual(ada);
    expect(await store.humanById('h_1')).toEqual(ada);
    expect(await store.humanByName('Grace')).toBeUndefined();
  });

  it('keeps sessions until deleted', async () => {
    const session: Session = { idHash: 'sess1', humanId: 'h_1', csrf: 'c', expiresAt: time + 60_000 };
    await store.saveSession(session);
    expect(await store.session('sess1')).toEqual(session);
    await store.deleteSession('sess1');
    expect(await store.session('sess1')).toBeUndefined();
  });

  it('counts attempts in a window that starts with the first and ends on the clock', async () => {
    expect(await store.attempts('addr:1')).toEqual({ count: 0, resetAt: 0 });
    const resetAt = time + 60_000;
    for (let i = 1; i <= 3; i += 1) {
      expect(await store.countAttempt('addr:1', 60_000)).toEqual({ count: i, resetAt });
      time += 1_000;
    }
    expect(await store.attempts('addr:1')).toEqual({ count: 3, resetAt });
    expect(await store.attempts('addr:2')).toEqual({ count: 0, resetAt: 0 });
    time = resetAt;
    expect(await store.attempts('addr:1')).toEqual({ count: 0, resetAt: 0 });
    expect(await store.countAttempt('addr:1', 60_000)).toEqual({ count: 1, resetAt: resetAt + 60_000 });
  });

  it('counts 20 concurrent attempts exactly', async () => {
    await Promise.all(Array.from({ length: 20 }, () => store.countAttempt('session:x', 60_000)));
    expect((await store.attempts('session:x')).count).toBe(20);
  });

  it('fills a leaky bucket by one per event and drains it one per interval on the clock, 20 concurrent fills exactly', async () => {
    expect(await store.bucketLevel('addr:1', 10_000)).toBe(0);
    expect(await store.fillBucket('addr:1', 10_000)).toBe(1);
    expect(await store.fillBucket('addr:1', 10_000)).toBe(2);
    time += 5_000;
    expect(await store.bucketLevel('addr:1', 10_000)).toBeCloseTo(1.5, 6);
    expect(await store.fillBucket('addr:1', 10_000)).toBeCloseTo(2.5, 6);
    expect(await store.bucketLevel('addr:2', 10_000)).toBe(0);
    time += 25_000;
    expect(await store.bucketLevel('addr:1', 10_000)).toBe(0);
    await Promise.all(Array.from({ length: 20 }, () => store.fillBucket('addr:3', 10_000)));
    expect(await store.bucketLevel('addr:3', 10_000)).toBeCloseTo(20, 6);
  });

  if (name === 'memory') {
    it('lets flows, tokens and sessions lapse at their own time', async () => {
      const f = flow();
      const t = token();
      await store.createFlow(f);
      await store.saveToken(t, t.expiresAt + 1_000);
      await store.saveSession({ idHash: 's', humanId: 'h', csrf: 'c', expiresAt: time + 60_000 });
      time += 60_000;
      expect(await store.session('s')).toBeUndefined();
      time = f.retainUntil;
      expect(await store.flowByDevice(f.deviceHash)).toBeUndefined();
      expect(await store.flowByUserCode(f.userCode)).toBeUndefined();
      expect(await store.createFlow(flow({ userCode: f.userCode }))).toBe(true);
      time = t.expiresAt + 1_000;
      expect(await store.tokenByHash(t.hash)).toBeUndefined();
      expect(await store.tokensOfHuman(t.humanId)).toEqual([]);
      await store.updateToken({ ...t, revokedAt: time });
      expect(await store.tokenById(t.id)).toBeUndefined();
    });
  }
});

describe('RedisAuthStore', () => {
  const prefix = 'authkeys';
  let store: RedisAuthStore;

  beforeAll(async () => {
    store = new RedisAuthStore(redis, prefix, clock);
    time = Date.parse('2026-11-22T12:00:00Z');
    const f = flow({ deviceHash: 'abc', userCode: 'DFGHJKLM' });
    await store.createFlow(f);
    await store.admitPoll(f, 3_000);
    const t = token({ id: 'tok_1', hash: 'th', humanId: 'h_ada', agentId: 'a_1' });
    await store.saveToken(t, t.expiresAt + 30 * 86_400_000);
    await store.createHuman({ id: 'h_ada', name: 'Ada Lovelace', passwordHash: 'x', createdAt: 1 });
    await store.saveSession({ idHash: 's', humanId: 'h_ada', csrf: 'c', expiresAt: time + 60_000 });
    await store.countAttempt('addr:127.0.0.1', 900_000);
  });

  it('puts every key under a hash tag, and names no human in a key', async () => {
    const keys = await redis.keys(`${prefix}:*`);
    expect(keys.length).toBeGreaterThanOrEqual(10);
    for (const key of keys) expect(key).toMatch(/^authkeys:auth:\{[^{}]+\}(:[a-z]+)?$/);
    expect(keys.join(' ')).not.toMatch(/lovelace/i);
  });

  it('gives every record that ends a TTL: flows and their poll marker, tokens and their indexes, sessions, attempts', async () => {
    const ttl = (key: string): Promise<number> => redis.pttl(`${prefix}:auth:${key}`);
    const day = 86_400_000;
    for (const key of ['{flow:abc}', '{flow:abc}:poll', '{code:DFGHJKLM}']) {
      expect(await ttl(key)).toBeGreaterThan(4_400_000);
      expect(await ttl(key)).toBeLessThanOrEqual(4_500_000);
    }
    for (const key of ['{token:th}', '{token-id:tok_1}', '{human:h_ada}:tokens', '{agent:a_1}:tokens']) {
      expect(await ttl(key)).toBeGreaterThan(30 * day);
      expect(await ttl(key)).toBeLessThanOrEqual(31 * day);
    }
    expect(await ttl('{session:s}')).toBeGreaterThan(50_000);
    expect(await ttl('{attempts:addr:127.0.0.1}')).toBeGreaterThan(800_000);
    // Humans do not expire.
    expect(await ttl('{human:h_ada}')).toBe(-1);
  });

  it('keeps a token index as long as its longest-kept token, and a revocation keeps the TTL', async () => {
    const day = 86_400_000;
    const longer = token({ id: 'tok_2', hash: 'th2', humanId: 'h_ada', agentId: 'a_1', expiresAt: time + 90 * day });
    await store.saveToken(longer, longer.expiresAt);
    const shorter = token({ id: 'tok_3', hash: 'th3', humanId: 'h_ada', agentId: 'a_1', expiresAt: time + day });
    await store.saveToken(shorter, shorter.expiresAt);
    expect(await redis.pttl(`${prefix}:auth:{human:h_ada}:tokens`)).toBeGreaterThan(89 * day);
    await store.updateToken({ ...shorter, revokedAt: time });
    expect(await redis.pttl(`${prefix}:auth:{token:th3}`)).toBeGreaterThan(day - 60_000);
    expect(await redis.pttl(`${prefix}:auth:{token:th3}`)).toBeLessThanOrEqual(day);
  });

  it('drops index entries of tokens whose records are gone', async () => {
    await redis.del(`${prefix}:auth:{token-id:tok_1}`);
    expect((await store.tokensOfHuman('h_ada')).map((t) => t.id)).not.toContain('tok_1');
    expect(await redis.zrange(`${prefix}:auth:{human:h_ada}:tokens`, '0', '-1')).not.toContain('tok_1');
  });
});
