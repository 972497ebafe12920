import { connectRedis, type LocalRedis, type Redis, startRedisServer } from '@agentroom/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeviceFlow, Human, TokenRecord } from '../src/records.js';
import type { AuthStore } from '../src/store.js';
import { MemoryAuthStore } from '../src/store-memory.js';
import { RedisAuthStore } from '../src/store-redis.js';

let redisServer: LocalRedis;
let redis: Redis;
let prefixes = 0;

beforeAll(async () => {
  redisServer = await startRedisServer();
  redis = connectRedis(redisServer.url, 'auth-store-test');
});

afterAll(async () => {
  await redis.quit();
  await redisServer.stop();
});

const implementations: [string, () => AuthStore][] = [
  ['memory', () => new MemoryAuthStore()],
  ['redis', () => new RedisAuthStore(redis, `as${(prefixes += 1)}`)],
];

function flow(overrides: Partial<DeviceFlow> = {}): DeviceFlow {
  const now = Date.now();
  return {
    deviceHash: `hash${Math.random()}`,
    userCode: 'BCDFGHJK',
    scopes: ['posts:write'],
    agentName: 'scout',
    createdAt: now,
    expiresAt: now + 900_000,
    retainUntil: now + 4_500_000,
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
    createdAt: Date.now(),
    expiresAt: Date.now() + 86_400_000,
    ...overrides,
  };
}

describe.each(implementations)('AuthStore contract: %s', (_name, makeStore) => {
  it('keeps a flow by device hash and by user code, and updates it', async () => {
    const store = makeStore();
    const f = flow();
    await store.createFlow(f);
    expect(await store.flowByDevice(f.deviceHash)).toEqual(f);
    expect(await store.flowByUserCode('BCDFGHJK')).toEqual(f);
    await store.updateFlow({ ...f, status: 'declined' });
    expect((await store.flowByDevice(f.deviceHash))?.status).toBe('declined');
    await store.deleteFlow(f);
    expect(await store.flowByDevice(f.deviceHash)).toBeUndefined();
    expect(await store.flowByUserCode('BCDFGHJK')).toBeUndefined();
  });

  it('hands a flow to exactly one of 20 concurrent takers', async () => {
    const store = makeStore();
    const f = flow({ userCode: 'CDFGHJKL' });
    await store.createFlow(f);
    const taken = await Promise.all(Array.from({ length: 20 }, () => store.takeFlow(f.deviceHash)));
    expect(taken.filter(Boolean)).toHaveLength(1);
    expect(await store.flowByUserCode('CDFGHJKL')).toBeUndefined();
  });

  it('admits one poll per interval and says how long to wait', async () => {
    const store = makeStore();
    const now = Date.now();
    expect(await store.admitPoll('dev1', 3_000, now)).toEqual({ admitted: true, retryAfterMs: 0 });
    const again = await store.admitPoll('dev1', 3_000, now + 10);
    expect(again.admitted).toBe(false);
    expect(again.retryAfterMs).toBeGreaterThan(2_000);
    expect(again.retryAfterMs).toBeLessThanOrEqual(3_000);
    expect((await store.admitPoll('dev2', 3_000, now)).admitted).toBe(true);
  });

  it('keeps tokens by hash and id, and lists them per human and per agent, newest first', async () => {
    const store = makeStore();
    const older = token({ createdAt: 1_000 });
    const newer = token({ createdAt: 2_000, agentId: 'a_other0001' });
    await store.saveToken(older);
    await store.saveToken(newer);
    expect(await store.tokenByHash(older.hash)).toEqual(older);
    expect(await store.tokenById(newer.id)).toEqual(newer);
    expect((await store.tokensOfHuman('h_ada')).map((t) => t.id)).toEqual([newer.id, older.id]);
    expect((await store.tokensOfAgent('a_agent0001')).map((t) => t.id)).toEqual([older.id]);
    await store.saveToken({ ...older, revokedAt: 3_000 });
    expect((await store.tokenById(older.id))?.revokedAt).toBe(3_000);
  });

  it('creates humans with names unique regardless of case', async () => {
    const store = makeStore();
    const ada: Human = { id: 'h_1', name: 'Ada Lovelace', passwordHash: 'x', createdAt: 1 };
    expect(await store.createHuman(ada)).toBe(true);
    expect(await store.createHuman({ ...ada, id: 'h_2', name: 'ada lovelace' })).toBe(false);
    expect(await store.humanByName('ADA LOVELACE')).toEqual(ada);
    expect(await store.humanById('h_1')).toEqual(ada);
  });

  it('keeps sessions until deleted', async () => {
    const store = makeStore();
    const session = { idHash: 'sess1', humanId: 'h_1', csrf: 'c', expiresAt: Date.now() + 60_000 };
    await store.saveSession(session, 60_000);
    expect(await store.session('sess1')).toEqual(session);
    await store.deleteSession('sess1');
    expect(await store.session('sess1')).toBeUndefined();
  });

  it('counts attempts in a window', async () => {
    const store = makeStore();
    expect(await store.attemptCount('addr:1')).toBe(0);
    for (let i = 1; i <= 3; i += 1) expect(await store.countAttempt('addr:1', 60_000, Date.now())).toBe(i);
    expect(await store.attemptCount('addr:1')).toBe(3);
  });
});

describe('RedisAuthStore', () => {
  it('puts every key under a hash tag of its own and gives expiring records a TTL', async () => {
    const store = new RedisAuthStore(redis, 'authkeys');
    await store.createFlow(flow({ deviceHash: 'abc', userCode: 'DFGHJKLM' }));
    await store.saveSession({ idHash: 's', humanId: 'h', csrf: 'c', expiresAt: Date.now() + 60_000 }, 60_000);
    const keys = await redis.keys('authkeys:*');
    for (const key of keys) expect(key).toMatch(/^authkeys:auth:\{[^}]+\}/);
    expect(await redis.pttl('authkeys:auth:{flow:abc}')).toBeGreaterThan(4_000_000);
    expect(await redis.pttl('authkeys:auth:{session:s}')).toBeGreaterThan(50_000);
  });
});
