import {
  type Clock,
  type Cluster,
  compareStreamIds,
  connectRedis,
  connectRedisCluster,
  type LocalRedis,
  type LocalRedisCluster,
  type Redis,
  startRedisCluster,
  startRedisServer,
} from '@agentroom/kit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { DeviceFlow, Human, Session, TokenRecord } from '../src/records.js';
import type { AuthStore, Revocation, RevocationWatcher } from '../src/store.js';
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

/** A watcher that writes down what the feed tells it. */
function recorder(): { watcher: RevocationWatcher; revoked: Revocation[]; alive: () => number; broken: () => Error | undefined } {
  const revoked: Revocation[] = [];
  let alive = 0;
  let broken: Error | undefined;
  return {
    watcher: {
      revoked: (revocation) => revoked.push(revocation),
      alive: () => (alive += 1),
      broken: (error) => (broken = error),
    },
    revoked,
    alive: () => alive,
    broken: () => broken,
  };
}

/** Waits until `check` holds; the test's own timeout bounds the wait (nothing here measures time). */
async function eventually(check: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 10));
}

/** A short heartbeat, so the tests that wait for one wait little. */
const FEED = { heartbeatMs: 50 } as const;

/** Two stores on one storage, as two auth replicas see it; in memory there is one process and one store. */
const replicas: [string, () => [AuthStore, AuthStore]][] = [
  [
    'memory',
    () => {
      const store = new MemoryAuthStore(clock, FEED);
      return [store, store];
    },
  ],
  [
    'redis',
    () => {
      const prefix = `rv${(prefixes += 1)}`;
      return [new RedisAuthStore(redis, prefix, clock, FEED), new RedisAuthStore(redis, prefix, clock, FEED)];
    },
  ],
  [
    'redis cluster',
    () => {
      const prefix = `rv${(prefixes += 1)}`;
      return [new RedisAuthStore(clusterClient, prefix, clock, FEED), new RedisAuthStore(clusterClient, prefix, clock, FEED)];
    },
  ],
];

describe.each(replicas)('AuthStore revocation feed contract: %s', (_name, makeReplicas) => {
  let one: AuthStore;
  let other: AuthStore;
  const revocation = (n: number): Omit<Revocation, 'id'> => ({ tokenId: `tok_${n}`, agentId: `a_agent${n}`, revokedAt: time + n });

  beforeEach(() => {
    [one, other] = makeReplicas();
  });

  it('tells a positioned watcher every revocation published from then on, by either replica, in order, and none from before', async () => {
    await one.publishRevocation(revocation(0));
    const seen = recorder();
    const stop = await other.watchRevocations(seen.watcher);
    const published = [await one.publishRevocation(revocation(1)), await other.publishRevocation(revocation(2)), await one.publishRevocation(revocation(3))];
    await eventually(() => seen.revoked.length >= 3);
    expect(seen.revoked).toEqual(published);
    expect(published.map((r) => r.tokenId)).toEqual(['tok_1', 'tok_2', 'tok_3']);
    expect(published[1]).toMatchObject({ agentId: 'a_agent2', revokedAt: time + 2 });
    for (let i = 1; i < published.length; i += 1) expect(compareStreamIds(published[i]!.id, published[i - 1]!.id)).toBeGreaterThan(0);
    stop();
    expect(seen.broken()).toBeUndefined();
  });

  it('says the feed is alive while no revocation comes', async () => {
    const seen = recorder();
    const stop = await one.watchRevocations(seen.watcher);
    await eventually(() => seen.alive() >= 2);
    stop();
    expect(seen.revoked).toEqual([]);
  });

  it('serves many watchers; one that leaves hears nothing more while the others go on', async () => {
    const leaving = recorder();
    const staying = recorder();
    const stopLeaving = await other.watchRevocations(leaving.watcher);
    const stopStaying = await other.watchRevocations(staying.watcher);
    await one.publishRevocation(revocation(1));
    await eventually(() => leaving.revoked.length === 1 && staying.revoked.length === 1);
    stopLeaving();
    await one.publishRevocation(revocation(2));
    await one.publishRevocation(revocation(3));
    // Once the watcher that stayed has the last one, the one that left would have had it too.
    await eventually(() => staying.revoked.length === 3);
    expect(leaving.revoked.map((r) => r.tokenId)).toEqual(['tok_1']);
    stopStaying();
    // The last watcher gone, a new watch positions afresh and still hears what comes next.
    const later = recorder();
    const stopLater = await one.watchRevocations(later.watcher);
    await other.publishRevocation(revocation(4));
    await eventually(() => later.revoked.length === 1);
    expect(later.revoked[0]?.tokenId).toBe('tok_4');
    stopLater();
  });
});

describe('RedisAuthStore revocation feed', () => {
  it('keeps the feed in one capped stream under a hash tag of its own', async () => {
    const store = new RedisAuthStore(redis, 'feedkeys', clock);
    for (let batch = 0; batch < 21; batch += 1) {
      await Promise.all(Array.from({ length: 500 }, (_, i) => store.publishRevocation({ tokenId: `tok_${batch}_${i}`, agentId: 'a_1', revokedAt: time })));
    }
    expect(await redis.keys('feedkeys:*')).toEqual(['feedkeys:auth:{revocations}:feed']);
    // XADD MAXLEN ~ 10000 trims whole nodes of entries: about 10,000 kept, never all 10,500.
    const length = await redis.xlen('feedkeys:auth:{revocations}:feed');
    expect(length).toBeGreaterThanOrEqual(10_000);
    expect(length).toBeLessThan(10_500);
  });

  it('reads the feed on one connection per process, closed when the last watcher leaves', async () => {
    const readers = async (): Promise<number> => ((await redis.client('LIST')) as string).split('\n').filter((line) => line.includes(' name=auth-revocations ')).length;
    await eventually(async () => (await readers()) === 0);
    const store = new RedisAuthStore(redis, 'feedconn', clock, FEED);
    const watchers = [recorder(), recorder(), recorder()];
    const stops = await Promise.all(watchers.map((seen) => store.watchRevocations(seen.watcher)));
    // Once all three heard a revocation, the reading's connection is up (it connects lazily).
    await store.publishRevocation({ tokenId: 'tok_1', agentId: 'a_1', revokedAt: time });
    await eventually(() => watchers.every((seen) => seen.revoked.length === 1));
    expect(await readers()).toBe(1);
    for (const stop of stops) stop();
    await eventually(async () => (await readers()) === 0);
  });

  it('tells its watchers the feed broke when Redis goes away, and refuses new watches until it is back', async () => {
    const server = await startRedisServer();
    const client = connectRedis(server.url, 'auth-feed-outage-test');
    client.on('error', () => undefined);
    try {
      const store = new RedisAuthStore(client, 'outage', clock, FEED);
      const seen = recorder();
      await store.watchRevocations(seen.watcher);
      await server.stop();
      await eventually(() => seen.broken() !== undefined);
      await expect(store.watchRevocations(recorder().watcher)).rejects.toThrow();
    } finally {
      client.disconnect();
      await server.stop();
    }
  });
});
