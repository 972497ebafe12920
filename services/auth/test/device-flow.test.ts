import { createLogger, DomainError, mintToken, publicUrls } from '@agentroom/kit';
import { createRoomGrpcServer, MemoryRoomStore } from '@agentroom/room';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DeviceFlows } from '../src/device-flows.js';
import { AttemptLimiter, Humans } from '../src/humans.js';
import type { Human } from '../src/records.js';
import { RoomGateway } from '../src/room.gateway.js';
import { MemoryAuthStore } from '../src/store-memory.js';
import { Tokens } from '../src/tokens.js';

const urls = publicUrls({ PORT: 8080, SITE_URL: 'http://room.test', API_URL: undefined });
let roomServer: ReturnType<typeof createRoomGrpcServer>;
let roomStore: MemoryRoomStore;
let room: RoomGateway;

beforeAll(async () => {
  roomStore = new MemoryRoomStore();
  roomServer = createRoomGrpcServer({ store: roomStore, baseUrl: urls.baseUrl, log: createLogger('room', 'silent') });
  const port = await roomServer.listen('127.0.0.1:0');
  room = new RoomGateway(`127.0.0.1:${port}`, 2_000);
});

afterAll(async () => {
  room.close();
  await roomServer.shutdown(1_000);
});

/** The domain on a clock the test moves. */
let time: number;
let store: MemoryAuthStore;
let lookups: number;
let tokens: Tokens;
let flows: DeviceFlows;
let humans: Humans;
let ada: Human;
let grace: Human;

beforeEach(async () => {
  time = Date.parse('2026-11-22T12:00:00Z');
  const now = (): number => time;
  store = new MemoryAuthStore(now);
  lookups = 0;
  const tokenByHash = store.tokenByHash.bind(store);
  // Counts lookups on the real store, to show malformed tokens never reach it.
  store.tokenByHash = (hash) => {
    lookups += 1;
    return tokenByHash(hash);
  };
  tokens = new Tokens(store, urls, 90, now);
  flows = new DeviceFlows(store, tokens, room, urls, now);
  humans = new Humans(store, now);
  ada = await humans.register('Ada Lovelace', 'correct horse');
  grace = await humans.register('Grace Hopper', 'battery staple');
});

async function problem(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DomainError);
  return error as DomainError;
}

/** Polls as a well-behaved agent: after the interval. */
function pollLater(deviceCode: string): ReturnType<DeviceFlows['poll']> {
  time += 3_000;
  return flows.poll(deviceCode);
}

describe('starting a signup', () => {
  it('issues a device code, an XXXX-XXXX user code and the RFC 8628 timings, scopes in canonical order', async () => {
    const started = await flows.start({ scopes: ['posts:write', 'agents:read'], agentName: ' scout ', clientId: '', bearerToken: '' });
    expect(started.deviceCode).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(started.userCode).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(started).toMatchObject({ expiresIn: 900, interval: 3, scopes: ['agents:read', 'posts:write'] });
    expect((await flows.describe(started.userCode, ada)).agentName).toBe('scout');
  });

  it.each([[[]], [['posts:read']], [['posts:write', 'admin']]])('refuses scopes %j, naming the four valid ones', async (scopes) => {
    const error = await problem(flows.start({ scopes, agentName: '', clientId: '', bearerToken: '' }));
    expect(error.slug).toBe('invalid-scope');
    expect(error.remedy).toContain('agents:read, posts:write, messages:read, messages:write');
  });

  it('names the agent after client_id when agent_name is missing', async () => {
    const started = await flows.start({ scopes: ['posts:write'], agentName: '', clientId: 'oauth-cli', bearerToken: '' });
    expect((await flows.describe(started.userCode, ada)).agentName).toBe('oauth-cli');
  });
});

describe('polling', () => {
  it('answers pending, then slow_down with Retry-After when polled faster than the interval', async () => {
    const { deviceCode } = await flows.start({ scopes: ['posts:write'], agentName: 'scout', clientId: '', bearerToken: '' });
    expect(await flows.poll(deviceCode)).toEqual({ status: 'pending' });
    time += 1_000;
    const error = await problem(flows.poll(deviceCode));
    expect(error).toMatchObject({ slug: 'slow-down', status: 429 });
    expect(error.headers['Retry-After']).toBe('2');
    time += 2_000;
    expect(await flows.poll(deviceCode)).toEqual({ status: 'pending' });
  });

  it('delivers the token exactly once after approval, and the agent exists in the room', async () => {
    const { deviceCode, userCode } = await flows.start({ scopes: ['posts:write'], agentName: 'scout', clientId: '', bearerToken: '' });
    await flows.approve(userCode, ada);
    const result = await pollLater(deviceCode);
    if (result.status !== 'completed') throw new Error('expected completed');
    expect(result.grant.accessToken).toMatch(/^agt_/);
    expect(result.grant).toMatchObject({ humanLabel: 'Ada Lovelace', scopes: ['posts:write'] });
    expect(await roomStore.getAgent(result.grant.agentId)).toMatchObject({ agentName: 'scout', humanLabel: 'Ada Lovelace', scopes: ['posts:write'] });
    expect((await problem(pollLater(deviceCode))).slug).toBe('signup-unknown');
    const principal = await tokens.authenticate(result.grant.accessToken);
    expect(principal).toMatchObject({ agentId: result.grant.agentId, agentName: 'scout', humanLabel: 'Ada Lovelace', scopes: ['posts:write'] });
  });

  it('answers signup-declined once the human declines', async () => {
    const { deviceCode, userCode } = await flows.start({ scopes: ['posts:write'], agentName: 'scout', clientId: '', bearerToken: '' });
    await flows.decline(userCode, ada);
    expect((await problem(pollLater(deviceCode))).slug).toBe('signup-declined');
    expect((await problem(pollLater(deviceCode))).slug).toBe('signup-unknown');
  });

  it('expires after 900 seconds: signup-expired for the agent, an unknown code for the human', async () => {
    const { deviceCode, userCode } = await flows.start({ scopes: ['posts:write'], agentName: 'scout', clientId: '', bearerToken: '' });
    time += 897_000;
    expect(await flows.poll(deviceCode)).toEqual({ status: 'pending' });
    time += 3_000;
    expect((await problem(flows.describe(userCode, ada))).slug).toBe('user-code-unknown');
    expect((await problem(flows.approve(userCode, ada))).slug).toBe('user-code-unknown');
    expect((await problem(flows.poll(deviceCode))).slug).toBe('signup-expired');
  });

  it('answers signup-unknown for a device code nobody issued', async () => {
    expect((await problem(flows.poll('no-such-device-code'))).slug).toBe('signup-unknown');
  });
});

describe('the human step', () => {
  it('takes the user code case-insensitively, ignoring dashes and spaces', async () => {
    const { userCode } = await flows.start({ scopes: ['posts:write'], agentName: 'scout', clientId: '', bearerToken: '' });
    const typed = ` ${userCode.toLowerCase().replace('-', ' ')} `;
    expect((await flows.describe(typed, ada)).userCode).toBe(userCode);
    expect((await problem(flows.describe('BCDF-GHJA', ada))).slug).toBe('user-code-unknown');
  });

  it('limits wrong codes to 10 per 15 minutes per key', async () => {
    const limiter = new AttemptLimiter(store, () => time);
    const keys = ['session:s1', 'addr:127.0.0.1'];
    for (let i = 0; i < 10; i += 1) {
      await limiter.guard(keys);
      await limiter.fail(keys);
    }
    const error = await problem(limiter.guard(['session:other', 'addr:127.0.0.1']));
    expect(error).toMatchObject({ slug: 'too-many-attempts', status: 429 });
    time += 15 * 60_000 + 1;
    await expect(limiter.guard(keys)).resolves.toBeUndefined();
  });
});

describe('widening: same agent, more scopes', () => {
  it('makes a new token for the same agent, approvable only by its human; the old token keeps its scopes', async () => {
    const first = await flows.start({ scopes: ['posts:write'], agentName: 'scout', clientId: '', bearerToken: '' });
    await flows.approve(first.userCode, ada);
    const delivered = await pollLater(first.deviceCode);
    if (delivered.status !== 'completed') throw new Error('expected completed');
    const oldToken = delivered.grant.accessToken;

    const wider = await flows.start({ scopes: ['messages:read'], agentName: 'ignored', clientId: '', bearerToken: oldToken });
    const view = await flows.describe(wider.userCode, ada);
    expect(view).toMatchObject({ agentName: 'scout', widening: { agentId: delivered.grant.agentId, heldScopes: ['posts:write'] } });
    const refused = await problem(flows.approve(wider.userCode, grace));
    expect(refused.remedy).toMatch(/human who approved/);

    await flows.approve(wider.userCode, ada);
    const second = await pollLater(wider.deviceCode);
    if (second.status !== 'completed') throw new Error('expected completed');
    expect(second.grant.agentId).toBe(delivered.grant.agentId);
    expect((await tokens.authenticate(second.grant.accessToken)).scopes).toEqual(['messages:read']);
    expect((await tokens.authenticate(oldToken)).scopes).toEqual(['posts:write']);
    expect((await roomStore.getAgent(delivered.grant.agentId))?.scopes).toEqual(['posts:write', 'messages:read']);
  });

  it('refuses to widen with a token that does not work', async () => {
    expect((await problem(flows.start({ scopes: ['posts:write'], agentName: '', clientId: '', bearerToken: mintToken() }))).slug).toBe('token-invalid');
  });
});

describe('tokens', () => {
  async function issue(): Promise<string> {
    const { deviceCode, userCode } = await flows.start({ scopes: ['posts:write'], agentName: 'scout', clientId: '', bearerToken: '' });
    await flows.approve(userCode, ada);
    const result = await pollLater(deviceCode);
    if (result.status !== 'completed') throw new Error('expected completed');
    return result.grant.accessToken;
  }

  it('expire after TOKEN_TTL_DAYS with token-expired', async () => {
    const token = await issue();
    const { expiresAt } = await tokens.authenticate(token);
    const approvedAt = time - 3_000;
    expect(Date.parse(expiresAt) - approvedAt).toBe(90 * 86_400_000);
    time = Date.parse(expiresAt) - 1;
    await expect(tokens.authenticate(token)).resolves.toBeDefined();
    time += 1;
    expect((await problem(tokens.authenticate(token))).slug).toBe('token-expired');
  });

  it('stop working once revoked, by the agent or by its human', async () => {
    const token = await issue();
    await tokens.revoke(token);
    expect((await problem(tokens.authenticate(token))).slug).toBe('token-invalid');
    const other = await issue();
    const [record] = await tokens.liveOfHuman(ada.id);
    expect((await problem(tokens.revokeForHuman(grace.id, record?.id ?? ''))).slug).toBe('not-found');
    await tokens.revokeForHuman(ada.id, record?.id ?? '');
    expect((await problem(tokens.authenticate(other))).slug).toBe('token-invalid');
  });

  it('refuse a token with a wrong checksum before any store lookup', async () => {
    const token = await issue();
    const before = lookups;
    const mangled = `${token.slice(0, -1)}${token.endsWith('a') ? 'b' : 'a'}`;
    expect((await problem(tokens.authenticate(mangled))).slug).toBe('token-invalid');
    expect((await problem(tokens.authenticate('agt_short'))).slug).toBe('token-invalid');
    expect(lookups).toBe(before);
    await tokens.authenticate(token);
    expect(lookups).toBe(before + 1);
  });
});

describe('humans', () => {
  it('verify passwords hashed with scrypt, and refuse a taken name', async () => {
    expect((await humans.verify('ada lovelace', 'correct horse'))?.id).toBe(ada.id);
    expect(await humans.verify('Ada Lovelace', 'wrong password')).toBeUndefined();
    expect(await humans.verify('Nobody', 'correct horse')).toBeUndefined();
    expect(ada.passwordHash).toMatch(/^scrypt\$/);
    expect(ada.passwordHash).not.toContain('correct horse');
    expect((await problem(humans.register('ADA LOVELACE', 'another one'))).remedy).toMatch(/another name/);
  });

  it('open and close sessions whose cookie value is stored only as a hash', async () => {
    const { sessionId, session } = await humans.openSession(ada.id);
    expect(session.idHash).not.toBe(sessionId);
    expect((await humans.session(sessionId))?.human.name).toBe('Ada Lovelace');
    await humans.closeSession(sessionId);
    expect(await humans.session(sessionId)).toBeUndefined();
  });
});
