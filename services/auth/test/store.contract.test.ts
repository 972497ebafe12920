import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { type Clock, type Cluster, compareStreamIds, connectRedis, connectRedisCluster, type Redis } from '@agentroom/kit/store';
import { type LocalRedisCluster, startRedisCluster } from '@agentroom/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type {
  AuthorizationCode,
  AuthorizationRequest,
  Connection,
  DeviceFlow,
  Human,
  OAuthClient,
  RefreshTokenRecord,
  Session,
  SuspensionRecord,
  TokenRecord,
} from '../src/records.js';
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

const DAY = 86_400_000;
let oauthRecords = 0;

function connection(overrides: Partial<Connection> = {}): Connection {
  oauthRecords += 1;
  return {
    id: `con_${oauthRecords}`,
    clientId: 'cl_host',
    clientName: 'Host {of} Ada',
    clientKind: 'registered',
    humanId: 'h_ada',
    humanLabel: 'Ada',
    agentId: 'a_agent0001',
    agentName: 'scout',
    scopes: ['posts:write'],
    createdAt: time,
    lastUsedAt: time,
    expiresAt: time + 90 * DAY,
    ...overrides,
  };
}

function authorizationCode(overrides: Partial<AuthorizationCode> = {}): AuthorizationCode {
  oauthRecords += 1;
  return {
    hash: `code${oauthRecords}`,
    clientId: 'cl_host',
    redirectUri: 'http://127.0.0.1:8976/callback',
    codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    connectionId: 'con_1',
    expiresAt: time + 60_000,
    ...overrides,
  };
}

function refreshRecord(overrides: Partial<RefreshTokenRecord> = {}): RefreshTokenRecord {
  oauthRecords += 1;
  return { hash: `refresh${oauthRecords}`, connectionId: 'con_1', clientId: 'cl_host', expiresAt: time + 90 * DAY, ...overrides };
}

function authorizationRequest(overrides: Partial<AuthorizationRequest> = {}): AuthorizationRequest {
  oauthRecords += 1;
  return {
    id: `req${oauthRecords}`,
    clientId: 'https://host.example/client.json',
    redirectUri: 'https://host.example/callback',
    state: 'a state: {with} "quotes"',
    codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    scopes: ['posts:write', 'messages:read'],
    resource: 'https://room.example/api/mcp',
    createdAt: time,
    expiresAt: time + 600_000,
    ...overrides,
  };
}

function oauthClient(overrides: Partial<OAuthClient> = {}): OAuthClient {
  oauthRecords += 1;
  return {
    clientId: `cl_${oauthRecords}`,
    kind: 'registered',
    clientName: 'Host',
    redirectUris: ['http://127.0.0.1:8976/callback', 'com.example.host:/callback'],
    grantTypes: ['authorization_code', 'refresh_token'],
    responseTypes: ['code'],
    createdAt: time,
    registeredFrom: '127.0.0.1',
    ...overrides,
  };
}

/**
 * Lets `ms` pass for both stores: the memory store reads the test's clock, Redis expires keys on
 * its own, so the clock moves and the test waits as long.
 */
async function elapse(ms: number): Promise<void> {
  time += ms;
  await new Promise((resolve) => setTimeout(resolve, ms));
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
      expect((await store.liveTokensOfHuman('h_ada', 'approved', 50)).tokens.map((t) => t.id)).toEqual([newer.id, older.id]);
      expect((await store.tokensOfAgent('a_agent0001')).map((t) => t.id)).toEqual([older.id]);
      expect(await store.liveTokensOfHuman('h_nobody', 'approved', 50)).toEqual({ tokens: [], total: 0, offset: 0, hasMore: false });
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
      // Each in its own list: the operator's agents apart from those the human approved.
      expect((await store.liveTokensOfHuman('h_ada', 'provisioned', 50)).tokens).toEqual([provisioned]);
      const [listed] = (await store.liveTokensOfHuman('h_ada', 'approved', 50)).tokens;
      expect(listed?.id).toBe(approved.id);
      expect(listed).not.toHaveProperty('provisioned');
      await store.updateToken({ ...provisioned, revokedAt: time });
      expect(await store.tokenById(provisioned.id)).toEqual({ ...provisioned, revokedAt: time });
    });

    it("pages a human's list newest first, tokens of one millisecond by id, from where the page before ended", async () => {
      // 7 tokens over 4 milliseconds, saved out of order: the order is the list's, not the saves'.
      const made = [0, 1, 1, 1, 2, 3, 3].map((ms, i) => token({ id: `tok_${'gcaefbd'[i]}`, createdAt: time - 10 + ms }));
      for (const t of [...made].reverse()) await store.saveToken(t, t.expiresAt);
      const newestFirst = [...made].sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1)).map((t) => t.id);
      expect(newestFirst).toEqual(['tok_d', 'tok_b', 'tok_f', 'tok_e', 'tok_c', 'tok_a', 'tok_g']);
      const pages: string[][] = [];
      let after: TokenRecord | undefined;
      for (;;) {
        const page = await store.liveTokensOfHuman('h_ada', 'approved', 3, after);
        expect(page.total).toBe(7);
        expect(page.offset).toBe(pages.flat().length);
        pages.push(page.tokens.map((t) => t.id));
        after = page.tokens.at(-1);
        if (!page.hasMore) break;
      }
      expect(pages).toEqual([newestFirst.slice(0, 3), newestFirst.slice(3, 6), newestFirst.slice(6)]);
      // A page after a token revoked since starts where it was: nothing skipped, nothing twice.
      const third = made.find((t) => t.id === 'tok_f') as TokenRecord;
      await store.updateToken({ ...third, revokedAt: time });
      const next = await store.liveTokensOfHuman('h_ada', 'approved', 3, third);
      expect(next).toMatchObject({ total: 6, offset: 2, hasMore: true });
      expect(next.tokens.map((t) => t.id)).toEqual(['tok_e', 'tok_c', 'tok_a']);
    });

    it("lists live tokens only: a revoked or expired one leaves its list and its count, a connection's is in none", async () => {
      const lasting = token({ expiresAt: time + 90 * DAY });
      const brief = token({ createdAt: time + 1, expiresAt: time + 1_000 });
      const revoked = token({ createdAt: time + 2 });
      const ofConnection = token({ createdAt: time + 3, connectionId: 'con_1' });
      const loadTest = token({ createdAt: time + 4, provisioned: { reason: 'k6', at: time }, expiresAt: time + 1_000 });
      for (const t of [lasting, brief, revoked, ofConnection, loadTest]) await store.saveToken(t, t.expiresAt + DAY);
      await store.updateToken({ ...revoked, revokedAt: time });
      const approved = await store.liveTokensOfHuman('h_ada', 'approved', 50);
      expect(approved.tokens.map((t) => t.id)).toEqual([brief.id, lasting.id]);
      expect(approved.total).toBe(2);
      expect((await store.liveTokensOfHuman('h_ada', 'provisioned', 50)).total).toBe(1);
      // Expired, yet kept a while to answer token-expired: off the lists.
      await elapse(1_000);
      expect(await store.tokenById(brief.id)).toEqual(brief);
      expect(await store.liveTokensOfHuman('h_ada', 'approved', 50)).toEqual({ tokens: [lasting], total: 1, offset: 0, hasMore: false });
      expect(await store.liveTokensOfHuman('h_ada', 'provisioned', 50)).toEqual({ tokens: [], total: 0, offset: 0, hasMore: false });
      // The connection's token is read as its agent's, never as a row of a list.
      expect((await store.tokensOfAgent(ofConnection.agentId)).map((t) => t.id)).toContain(ofConnection.id);
    });
  });

  describe('OAuth records', () => {
    it('keeps a record by kind and id, apart from other kinds with the same id, until deleted', async () => {
      const client = oauthClient({ clientId: 'shared-id' });
      const request = authorizationRequest({ id: 'shared-id' });
      await store.putRecord('client', 'shared-id', client, time + DAY);
      await store.putRecord('authorization', 'shared-id', request, request.expiresAt);
      expect(await store.record('client', 'shared-id')).toEqual(client);
      expect(await store.record('authorization', 'shared-id')).toEqual(request);
      expect(await store.record('code', 'shared-id')).toBeUndefined();
      expect(await store.record('client', 'cl_nothing')).toBeUndefined();
      await store.deleteRecord('client', 'shared-id');
      expect(await store.record('client', 'shared-id')).toBeUndefined();
      expect(await store.record('authorization', 'shared-id')).toEqual(request);
      // Deleting what is not there is no error.
      await store.deleteRecord('client', 'shared-id');
      await store.deleteRecord('code', 'never-stored');
    });

    it('answers a copy: changing what it answered changes nothing stored', async () => {
      const c = connection();
      await store.putRecord('connection', c.id, c, c.expiresAt, c.humanId);
      const read = await store.record('connection', c.id);
      read?.scopes.push('messages:write');
      c.scopes.push('agents:read');
      expect((await store.record('connection', c.id))?.scopes).toEqual(['posts:write']);
    });

    it('replaces a record in place with updateRecord; a record that is gone stays gone', async () => {
      const c = connection();
      await store.putRecord('connection', c.id, c, c.expiresAt, c.humanId);
      const revoked = { ...c, revokedAt: time, refreshHash: 'refresh-hash' };
      await store.updateRecord('connection', c.id, revoked);
      expect(await store.record('connection', c.id)).toEqual(revoked);
      const never = connection();
      await store.updateRecord('connection', never.id, never);
      expect(await store.record('connection', never.id)).toBeUndefined();
      await store.deleteRecord('connection', c.id);
      await store.updateRecord('connection', c.id, revoked);
      expect(await store.record('connection', c.id)).toBeUndefined();
    });

    it('keeps the retention of put through update and use, and forgets the record when it ends', async () => {
      const code = authorizationCode();
      const refresh = refreshRecord();
      const c = connection();
      await store.putRecord('code', code.hash, code, time + 400);
      await store.putRecord('refresh', refresh.hash, refresh, time + 400);
      await store.putRecord('connection', c.id, c, time + 400, c.humanId);
      await elapse(200);
      await store.updateRecord('connection', c.id, { ...c, lastUsedAt: time });
      expect((await store.useRecord('code', code.hash, time))?.first).toBe(true);
      expect((await store.useRecord('refresh', refresh.hash, time))?.first).toBe(true);
      expect(await store.record('connection', c.id)).toEqual({ ...c, lastUsedAt: time });
      expect(await store.record('code', code.hash)).toEqual({ ...code, usedAt: time });
      // 500 ms after put: past the retention put gave, not past 400 ms counted again from the update or the use.
      await elapse(300);
      expect(await store.record('code', code.hash)).toBeUndefined();
      expect(await store.record('refresh', refresh.hash)).toBeUndefined();
      expect(await store.record('connection', c.id)).toBeUndefined();
      expect(await store.useRecord('code', code.hash, time)).toBeUndefined();
      expect(await store.recordsOf('connection', c.humanId)).toEqual([]);
      // Nor does an update bring it back.
      await store.updateRecord('connection', c.id, c);
      expect(await store.record('connection', c.id)).toBeUndefined();
    });

    it('marks a single-use record used once: first: true with the record as it was, then first: false with when it was used', async () => {
      for (const [kind, id, record] of [
        ['code', 'c', authorizationCode()],
        ['refresh', 'r', refreshRecord()],
        ['authorization', 'a', authorizationRequest()],
      ] as const) {
        await store.putRecord(kind, id, record, time + DAY);
        const usedAt = time + 5;
        expect(await store.useRecord(kind, id, usedAt), kind).toEqual({ record, first: true });
        time += 1_000;
        expect(await store.useRecord(kind, id, time), kind).toEqual({ record: { ...record, usedAt }, first: false });
        expect(await store.useRecord(kind, id, time), kind).toEqual({ record: { ...record, usedAt }, first: false });
        expect(await store.record(kind, id), kind).toEqual({ ...record, usedAt });
        expect(await store.useRecord(kind, `${id}-unknown`, time), kind).toBeUndefined();
      }
    });

    it('gives first: true to exactly one of 20 concurrent uses', async () => {
      const code = authorizationCode();
      await store.putRecord('code', code.hash, code, time + DAY);
      const uses = await Promise.all(Array.from({ length: 20 }, (_, i) => store.useRecord('code', code.hash, time + i)));
      const firsts = uses.filter((use) => use?.first === true);
      expect(firsts).toHaveLength(1);
      expect(firsts[0]?.record).toEqual(code);
      expect(uses.every((use) => use !== undefined)).toBe(true);
      const usedAt = (await store.record('code', code.hash))?.usedAt;
      expect(usedAt).toBeGreaterThanOrEqual(time);
      expect(usedAt).toBeLessThan(time + 20);
      for (const use of uses.filter((u) => u?.first === false)) expect(use?.record).toEqual({ ...code, usedAt });
    });

    it("lists an owner's records of a kind newest first, without other owners', other kinds' or deleted ones", async () => {
      const oldest = connection();
      await store.putRecord('connection', oldest.id, oldest, oldest.expiresAt, 'h_ada');
      time += 1_000;
      const middle = connection();
      await store.putRecord('connection', middle.id, middle, middle.expiresAt, 'h_ada');
      const grace = connection({ humanId: 'h_grace' });
      await store.putRecord('connection', grace.id, grace, grace.expiresAt, 'h_grace');
      // Not listed: another kind under the same owner, and a connection stored without an owner.
      const client = oauthClient();
      await store.putRecord('client', client.clientId, client, time + DAY, 'h_ada');
      const unlisted = connection();
      await store.putRecord('connection', unlisted.id, unlisted, unlisted.expiresAt);
      time += 1_000;
      const newest = connection();
      await store.putRecord('connection', newest.id, newest, newest.expiresAt, 'h_ada');

      expect(await store.recordsOf('connection', 'h_ada')).toEqual([newest, middle, oldest]);
      expect(await store.recordsOf('connection', 'h_grace')).toEqual([grace]);
      expect(await store.recordsOf('client', 'h_ada')).toEqual([client]);
      expect(await store.recordsOf('connection', 'h_nobody')).toEqual([]);

      // An update changes what is listed, not where.
      const revoked = { ...middle, revokedAt: time };
      await store.updateRecord('connection', middle.id, revoked);
      expect(await store.recordsOf('connection', 'h_ada')).toEqual([newest, revoked, oldest]);

      await store.deleteRecord('connection', newest.id);
      expect(await store.recordsOf('connection', 'h_ada')).toEqual([revoked, oldest]);
    });

    it('lists a record put again under its owner once, where its newest put places it (a refreshed connection)', async () => {
      // A human's connections of one host as one agent are counted from this list (docs/decisions.md §22).
      const first = connection();
      await store.putRecord('connection', first.id, first, first.expiresAt, 'h_ada');
      time += 1_000;
      const second = connection();
      await store.putRecord('connection', second.id, second, second.expiresAt, 'h_ada');
      time += 1_000;
      const refreshed = { ...first, refreshHash: 'hash2', lastUsedAt: time };
      await store.putRecord('connection', first.id, refreshed, refreshed.expiresAt + DAY, 'h_ada');
      expect(await store.recordsOf('connection', 'h_ada')).toEqual([refreshed, second]);
    });

    it('drops records past their retention from the list, and keeps the others', async () => {
      const lasting = connection();
      await store.putRecord('connection', lasting.id, lasting, time + DAY, 'h_ada');
      time += 1_000;
      const brief = connection();
      await store.putRecord('connection', brief.id, brief, time + 300, 'h_ada');
      expect((await store.recordsOf('connection', 'h_ada')).map((c) => c.id)).toEqual([brief.id, lasting.id]);
      await elapse(400);
      expect(await store.recordsOf('connection', 'h_ada')).toEqual([lasting]);
      // The one past its retention is gone for good, not only from the list.
      expect(await store.record('connection', brief.id)).toBeUndefined();
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

  describe('suspensions', () => {
    const human = (overrides: Partial<SuspensionRecord> = {}): SuspensionRecord => ({
      agentId: 'a_agent0001',
      by: 'human',
      actorId: 'h_ada',
      reason: 'runaway loop',
      since: time,
      ...overrides,
    });

    it('keeps one suspension an agent, a human replacing their own, until it is lifted', async () => {
      expect(await store.suspension('a_agent0001')).toBeUndefined();
      expect(await store.suspend(human())).toEqual({ held: human(), replaced: true });
      expect(await store.suspension('a_agent0001')).toEqual(human());
      expect(await store.suspension('a_agent0002')).toBeUndefined();
      const longer = human({ reason: 'still looping', until: time + 3_600_000 });
      expect(await store.suspend(longer)).toEqual({ held: longer, replaced: true });
      expect(await store.suspension('a_agent0001')).toEqual(longer);
      expect(await store.resume('a_agent0001', 'human')).toBe('lifted');
      expect(await store.suspension('a_agent0001')).toBeUndefined();
      expect(await store.resume('a_agent0001', 'human')).toBe('none');
    });

    it("holds a moderator's suspension against the agent's human: not replaced, not lifted, by them", async () => {
      const moderator = human({ by: 'moderator', actorId: 'h_mod', reason: 'spam' });
      await store.suspend(human());
      expect(await store.suspend(moderator)).toEqual({ held: moderator, replaced: true });
      expect(await store.suspend(human({ reason: 'mine' }))).toEqual({ held: moderator, replaced: false });
      expect(await store.resume('a_agent0001', 'human')).toBe('refused');
      expect(await store.suspension('a_agent0001')).toEqual(moderator);
      expect(await store.resume('a_agent0001', 'moderator')).toBe('lifted');
      expect(await store.suspension('a_agent0001')).toBeUndefined();
    });

    it('ends a suspension at its until on the clock: then it is over, and a human may suspend again', async () => {
      await store.suspend(human({ by: 'moderator', until: time + 60_000 }));
      time += 59_999;
      expect(await store.suspension('a_agent0001')).toMatchObject({ by: 'moderator' });
      time += 1;
      expect(await store.suspension('a_agent0001')).toBeUndefined();
      expect(await store.resume('a_agent0001', 'moderator')).toBe('none');
      expect((await store.suspend(human())).replaced).toBe(true);
      await store.suspend(human({ by: 'moderator', until: time + 60_000 }));
      time += 60_000;
      expect((await store.suspend(human())).replaced).toBe(true);
    });

    it("lets exactly the moderator's suspension stand when a human's and a moderator's race", async () => {
      const moderator = human({ by: 'moderator', actorId: 'h_mod', reason: 'spam' });
      await store.suspend(moderator);
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => store.suspend(human({ reason: `mine ${i}` }))));
      expect(answers.every((answer) => !answer.replaced)).toBe(true);
      expect(await store.suspension('a_agent0001')).toEqual(moderator);
    });
  });

  it('grants and takes the moderator role by human id', async () => {
    expect(await store.moderators()).toEqual([]);
    await store.setModerator('h_1', true);
    await store.setModerator('h_2', true);
    await store.setModerator('h_1', true);
    expect((await store.moderators()).sort()).toEqual(['h_1', 'h_2']);
    expect(await store.isModerator('h_1')).toBe(true);
    await store.setModerator('h_1', false);
    expect(await store.moderators()).toEqual(['h_2']);
    expect(await store.isModerator('h_1')).toBe(false);
    expect(await store.isModerator('h_3')).toBe(false);
  });

  it("moves a live token's end when its expiry is cut (a rotation): it leaves its list then", async () => {
    const t = token({ expiresAt: time + 86_400_000 });
    await store.saveToken(t, t.expiresAt + 1_000);
    await store.updateToken({ ...t, expiresAt: time + 300_000 });
    expect((await store.liveTokensOfHuman(t.humanId, 'approved', 50)).total).toBe(1);
    time += 300_000;
    expect((await store.liveTokensOfHuman(t.humanId, 'approved', 50)).total).toBe(0);
    expect(await store.tokenById(t.id)).toMatchObject({ expiresAt: time });
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
      expect((await store.liveTokensOfHuman(t.humanId, 'approved', 50)).total).toBe(0);
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
    for (const key of keys) expect(key).toMatch(/^authkeys:auth:\{[^{}]+\}(:[a-z-]+)?$/);
    expect(keys.join(' ')).not.toMatch(/lovelace/i);
  });

  it('gives every record that ends a TTL: flows and their poll marker, tokens and their indexes, sessions, attempts', async () => {
    const ttl = (key: string): Promise<number> => redis.pttl(`${prefix}:auth:${key}`);
    const day = 86_400_000;
    for (const key of ['{flow:abc}', '{flow:abc}:poll', '{code:DFGHJKLM}']) {
      expect(await ttl(key)).toBeGreaterThan(4_400_000);
      expect(await ttl(key)).toBeLessThanOrEqual(4_500_000);
    }
    for (const key of ['{token:th}', '{token-id:tok_1}', '{agent:a_1}:tokens']) {
      expect(await ttl(key)).toBeGreaterThan(30 * day);
      expect(await ttl(key)).toBeLessThanOrEqual(31 * day);
    }
    // A human's list holds live tokens only: it lasts until its last one expires.
    for (const key of ['{human:h_ada}:approved', '{human:h_ada}:approved-expiry']) {
      expect(await ttl(key)).toBeGreaterThan(day - 60_000);
      expect(await ttl(key)).toBeLessThanOrEqual(day);
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
    expect(await redis.pttl(`${prefix}:auth:{agent:a_1}:tokens`)).toBeGreaterThan(89 * day);
    expect(await redis.pttl(`${prefix}:auth:{human:h_ada}:approved`)).toBeGreaterThan(89 * day);
    await store.updateToken({ ...shorter, revokedAt: time });
    expect(await redis.pttl(`${prefix}:auth:{token:th3}`)).toBeGreaterThan(day - 60_000);
    expect(await redis.pttl(`${prefix}:auth:{token:th3}`)).toBeLessThanOrEqual(day);
  });

  it('drops index entries of tokens whose records are gone', async () => {
    await redis.del(`${prefix}:auth:{token-id:tok_1}`);
    expect((await store.tokensOfAgent('a_1')).map((t) => t.id)).not.toContain('tok_1');
    expect(await redis.zrange(`${prefix}:auth:{agent:a_1}:tokens`, '0', '-1')).not.toContain('tok_1');
    expect((await store.liveTokensOfHuman('h_ada', 'approved', 50)).tokens.map((t) => t.id)).not.toContain('tok_1');
    expect(await redis.zrange(`${prefix}:auth:{human:h_ada}:approved`, '0', '-1')).not.toContain(expect.stringContaining('tok_1'));
  });

  it("fills a human's lists once from the index earlier versions kept, then deletes it", async () => {
    const old = new RedisAuthStore(redis, 'authold', clock);
    const day = 86_400_000;
    // As an earlier version saved them: each record, and one index of every token of the human.
    const kept = [
      token({ id: 'tok_live', hash: 'hl', humanId: 'h_old', createdAt: time - 2 }),
      token({ id: 'tok_load', hash: 'hp', humanId: 'h_old', createdAt: time - 1, provisioned: { reason: 'k6', at: time - 1 } }),
      token({ id: 'tok_gone', hash: 'hr', humanId: 'h_old', createdAt: time, revokedAt: time }),
      token({ id: 'tok_host', hash: 'hc', humanId: 'h_old', createdAt: time, connectionId: 'con_1' }),
    ];
    for (const t of kept) {
      await redis.set(`authold:auth:{token:${t.hash}}`, JSON.stringify(t), 'PX', 30 * day);
      await redis.set(`authold:auth:{token-id:${t.id}}`, t.hash, 'PX', 30 * day);
      await redis.zadd('authold:auth:{human:h_old}:tokens', t.createdAt, t.id);
    }
    expect((await old.liveTokensOfHuman('h_old', 'approved', 50)).tokens.map((t) => t.id)).toEqual(['tok_live']);
    expect((await old.liveTokensOfHuman('h_old', 'provisioned', 50)).tokens.map((t) => t.id)).toEqual(['tok_load']);
    expect(await redis.exists('authold:auth:{human:h_old}:tokens')).toBe(0);
    expect(await redis.get('authold:auth:{human:h_old}:lists')).toBe('1');
    // Once: a token in no index now is not brought back.
    await redis.zadd('authold:auth:{human:h_old}:tokens', time, 'tok_host');
    expect((await old.liveTokensOfHuman('h_old', 'approved', 50)).total).toBe(1);
  });
});

describe('RedisAuthStore OAuth records', () => {
  const prefix = 'oauthkeys';
  let store: RedisAuthStore;

  /** The owner lists of the store: their members (sorted, comma-joined) and their TTL. */
  async function lists(): Promise<Map<string, number>> {
    const found = new Map<string, number>();
    for (const key of await redis.keys(`${prefix}:*`)) {
      if ((await redis.type(key)) !== 'zset') continue;
      found.set((await redis.zrange(key, '0', '-1')).sort().join(','), await redis.pttl(key));
    }
    return found;
  }

  beforeAll(() => {
    store = new RedisAuthStore(redis, prefix, clock);
  });

  it('stores each record under a hash tag with the TTL of its retention, kept by update and use; an owner list lives as long as its longest-kept record', async () => {
    time = Date.parse('2026-11-22T12:00:00Z');
    const long = connection({ id: 'con_long', humanLabel: 'Ada Lovelace' });
    const short = connection({ id: 'con_short', humanLabel: 'Ada Lovelace' });
    const code = authorizationCode({ hash: 'code_hash' });
    await store.putRecord('connection', long.id, long, time + 91 * DAY, 'h_ada');
    await store.putRecord('connection', short.id, short, time + DAY, 'h_ada');
    await store.putRecord('code', code.hash, code, time + 600_000);

    const keys = await redis.keys(`${prefix}:*`);
    expect(keys).toHaveLength(4);
    for (const key of keys) expect(key).toMatch(/^oauthkeys:auth:\{[^{}]+\}(:[a-z]+)?$/);
    expect(keys.join(' ')).not.toMatch(/lovelace/i);

    const strings = new Map<string, string>();
    for (const key of keys) {
      if ((await redis.type(key)) !== 'string') continue;
      const value = JSON.parse((await redis.get(key)) ?? '{}') as { id?: string; hash?: string };
      strings.set(value.id ?? value.hash ?? '?', key);
    }
    const ttl = async (id: string): Promise<number> => redis.pttl(strings.get(id) ?? 'missing');
    expect(await ttl('con_long')).toBeGreaterThan(90 * DAY);
    expect(await ttl('con_long')).toBeLessThanOrEqual(91 * DAY);
    expect(await ttl('con_short')).toBeGreaterThan(DAY - 60_000);
    expect(await ttl('con_short')).toBeLessThanOrEqual(DAY);
    expect(await ttl('code_hash')).toBeGreaterThan(590_000);
    expect(await ttl('code_hash')).toBeLessThanOrEqual(600_000);
    expect((await lists()).get('con_long,con_short')).toBeGreaterThan(90 * DAY);

    // A day later on the store's clock: an update and a use keep the TTL they had, neither lose it nor start it again.
    time += DAY / 2;
    await store.updateRecord('connection', short.id, { ...short, revokedAt: time });
    expect(await store.useRecord('code', code.hash, time)).toMatchObject({ first: true });
    expect(await ttl('con_short')).toBeGreaterThan(DAY - 60_000);
    expect(await ttl('con_short')).toBeLessThanOrEqual(DAY);
    expect(await ttl('code_hash')).toBeGreaterThan(590_000);
    expect(await ttl('code_hash')).toBeLessThanOrEqual(600_000);
  });

  it('drops list entries of records that are gone', async () => {
    const c = connection({ id: 'con_dropped' });
    await store.putRecord('connection', c.id, c, time + DAY, 'h_drop');
    const kept = connection({ id: 'con_kept' });
    await store.putRecord('connection', kept.id, kept, time + DAY, 'h_drop');
    await store.deleteRecord('connection', c.id);
    expect((await store.recordsOf('connection', 'h_drop')).map((r) => r.id)).toEqual(['con_kept']);
    expect([...(await lists()).keys()]).toContain('con_kept');
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
    const readers = async (): Promise<number> =>
      ((await redis.client('LIST')) as string).split('\n').filter((line) => line.includes(' name=auth-revocations ')).length;
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
