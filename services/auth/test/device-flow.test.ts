import * as grpc from '@grpc/grpc-js';
import { publicUrls } from '@agentroom/kit/config';
import { mintToken, SCOPES, SIGNUP_EXPIRES_IN_SECONDS, SIGNUP_POLL_INTERVAL_SECONDS } from '@agentroom/kit/domain';
import { CLIENT_OPTIONS, unaryCall } from '@agentroom/kit/grpc';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { DomainError } from '@agentroom/kit/problems';
import { type Clock, connectRedis, type Redis } from '@agentroom/kit/store';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import { type Agent__Output, type GetAgentResponse__Output, type ListAgentsResponse__Output, roomProto, type RoomServiceClient } from '@agentroom/proto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AttemptLimiter } from '../src/attempt-limiter.js';
import { DeviceFlows, type PollResult } from '../src/device-flow.js';
import { Humans, PASSWORD_HASH_COST_MIN } from '../src/humans.js';
import type { Grant, Human, TokenRecord } from '../src/records.js';
import { RoomGateway } from '../src/room.gateway.js';
import type { AuthStore } from '../src/store.js';
import { MemoryAuthStore } from '../src/store-memory.js';
import { RedisAuthStore } from '../src/store-redis.js';
import { Tokens } from '../src/tokens.js';

const urls = publicUrls({ PORT: 8080, SITE_URL: 'http://room.test', API_URL: undefined });
const SECOND = 1_000;
const DAY = 86_400_000;

/** The room service, its own process (memory storage), reached over gRPC as in production. */
let roomProcess: ServiceProcess;
let room: RoomGateway;
/** Reads the room back, to see what approvals made there. */
let roomClient: RoomServiceClient;
let redisServer: LocalRedis;
let redis: Redis;
let prefixes = 0;
/** Two humans, registered once (scrypt is slow on purpose) and copied into each test's store. */
let ada: Human;
let grace: Human;

beforeAll(async () => {
  roomProcess = await startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env: { SITE_URL: urls.siteUrl, LOG_LEVEL: 'silent' } });
  room = new RoomGateway(roomProcess.address, 2_000);
  roomClient = new (roomProto().RoomService)(roomProcess.address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  redisServer = await startRedisServer();
  redis = connectRedis(redisServer.url, 'auth-device-flow-test');
  const scratch = new Humans({ store: new MemoryAuthStore(), clock: { now: () => Date.now() }, passwordHashCost: PASSWORD_HASH_COST_MIN });
  ada = await scratch.register('Ada Lovelace', 'correct horse');
  grace = await scratch.register('Grace Hopper', 'battery staple');
});

afterAll(async () => {
  room.close();
  roomClient.close();
  await roomProcess.stop();
  await redis.quit();
  await redisServer.stop();
});

/** The clock every part of the domain reads; tests move it instead of sleeping. */
let time: number;
const clock: Clock = { now: () => time };

const stores: [string, () => AuthStore][] = [
  ['memory', () => new MemoryAuthStore(clock)],
  ['redis', () => new RedisAuthStore(redis, `df${(prefixes += 1)}`, clock)],
];

async function problem(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DomainError);
  return error as DomainError;
}

function completed(result: PollResult): Grant {
  if (result.status !== 'completed') throw new Error(`expected completed, got ${result.status}`);
  return result.grant;
}

/** The agent as the room service holds it, read back over gRPC. */
async function agentInRoom(agentId: string): Promise<Agent__Output | null> {
  const answer = await unaryCall<GetAgentResponse__Output>(2_000, (metadata, options, callback) =>
    roomClient.getAgent({ agentId }, metadata, options, callback),
  );
  return answer.agent;
}

/** The room's 50 most recently approved agents. */
async function agentsInRoom(): Promise<Agent__Output[]> {
  const answer = await unaryCall<ListAgentsResponse__Output>(2_000, (metadata, options, callback) =>
    roomClient.listAgents({ limit: 50 }, metadata, options, callback),
  );
  return answer.agents;
}

describe.each(stores)('device flows on the %s store', (_name, makeStore) => {
  let store: AuthStore;
  let lookups: number;
  let tokens: Tokens;
  let flows: DeviceFlows;
  let humans: Humans;

  beforeEach(async () => {
    time = Date.parse('2026-11-22T12:00:00Z');
    store = makeStore();
    await store.createHuman(ada);
    await store.createHuman(grace);
    lookups = 0;
    const tokenByHash = store.tokenByHash.bind(store);
    // Counts lookups on the real store, to show that malformed tokens never reach it.
    store.tokenByHash = (hash) => {
      lookups += 1;
      return tokenByHash(hash);
    };
    tokens = new Tokens({ store, room, ttlDays: 90, clock });
    flows = new DeviceFlows({ store, tokens, room, clock });
    humans = new Humans({ store, clock, passwordHashCost: PASSWORD_HASH_COST_MIN });
  });

  function start(
    scopes: string[] = ['posts:write'],
    more: { agentName?: string; clientId?: string; bearerToken?: string } = {},
  ): ReturnType<DeviceFlows['start']> {
    return flows.start({ scopes, agentName: more.agentName ?? 'scout', clientId: more.clientId ?? '', bearerToken: more.bearerToken ?? '' });
  }

  /** The live tokens the human approved one by one, newest first, as /account lists them. */
  async function approvedBy(humanId: string): Promise<TokenRecord[]> {
    return (await tokens.pageOfHuman(humanId, 'approved', 50)).tokens;
  }

  /** Polls as a well-behaved agent: one interval after the last poll. */
  function pollLater(deviceCode: string): Promise<PollResult> {
    time += 3 * SECOND;
    return flows.poll(deviceCode);
  }

  /** A whole signup: start, approve, poll once. */
  async function signUp(scopes: string[] = ['posts:write'], human = ada, more: { agentName?: string; bearerToken?: string } = {}): Promise<Grant> {
    const { deviceCode, userCode } = await start(scopes, more);
    await flows.approve(userCode, human);
    return completed(await pollLater(deviceCode));
  }

  describe('starting a signup', () => {
    it('issues a device code, an XXXX-XXXX user code and the RFC 8628 timings, scopes once each in canonical order', async () => {
      const started = await start(['posts:write', 'agents:read', 'posts:write'], { agentName: '  scout \t the  second ' });
      expect(started.deviceCode).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(started.userCode).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
      expect(started).toMatchObject({ expiresIn: SIGNUP_EXPIRES_IN_SECONDS, interval: SIGNUP_POLL_INTERVAL_SECONDS, scopes: ['agents:read', 'posts:write'] });
      expect(await flows.describe(started.userCode, ada)).toEqual({
        userCode: started.userCode,
        agentName: 'scout the second',
        scopes: ['agents:read', 'posts:write'],
      });
    });

    it('stores the device code only as a hash', async () => {
      const { deviceCode, userCode } = await start();
      expect(JSON.stringify(await store.flowByUserCode(userCode.replace('-', '')))).not.toContain(deviceCode);
    });

    it.each([[[]], [['posts:read']], [['posts:write', 'admin']], [['POSTS:WRITE']]])('refuses scopes %j, naming the four valid ones', async (scopes) => {
      const error = await problem(start(scopes));
      expect(error).toMatchObject({ slug: 'invalid-scope', status: 400 });
      expect(error.fields.valid_scopes).toEqual([...SCOPES]);
    });

    it('names the agent by agent_name, else client_id, else "an agent"', async () => {
      const byClient = await start(['posts:write'], { agentName: ' ', clientId: 'oauth-cli' });
      expect((await flows.describe(byClient.userCode, ada)).agentName).toBe('oauth-cli');
      const nameless = await start(['posts:write'], { agentName: '', clientId: '' });
      expect((await flows.describe(nameless.userCode, ada)).agentName).toBe('an agent');
    });

    it('counts the agent name in code points: 100 emoji pass, 101 characters do not', async () => {
      const emoji = await start(['posts:write'], { agentName: '🤖'.repeat(100) });
      expect((await flows.describe(emoji.userCode, ada)).agentName).toBe('🤖'.repeat(100));
      const error = await problem(start(['posts:write'], { agentName: 'x'.repeat(101) }));
      expect(error).toMatchObject({ slug: 'invalid-request', fields: { parameter: 'agent_name' } });
    });
  });

  describe('polling', () => {
    it('answers pending, always on the first poll, then slow-down with Retry-After when polled faster than the interval', async () => {
      const { deviceCode } = await start();
      expect(await flows.poll(deviceCode)).toEqual({ status: 'pending' });
      time += 1 * SECOND;
      const error = await problem(flows.poll(deviceCode));
      expect(error).toMatchObject({ slug: 'slow-down', status: 429, fields: { retry_after: 2 } });
      time += 1.5 * SECOND;
      expect((await problem(flows.poll(deviceCode))).fields.retry_after).toBe(1);
      time += 0.5 * SECOND;
      expect(await flows.poll(deviceCode)).toEqual({ status: 'pending' });
    });

    it('delivers the token exactly once after approval, and the agent exists in the room', async () => {
      const { deviceCode, userCode } = await start();
      expect(await flows.poll(deviceCode)).toEqual({ status: 'pending' });
      const view = await flows.approve(userCode, ada);
      expect(view).toMatchObject({ agentName: 'scout', scopes: ['posts:write'] });
      const result = await pollLater(deviceCode);
      const grant = completed(result);
      expect(grant.accessToken).toMatch(/^agt_[0-9A-Za-z]{49}$/);
      expect(grant).toMatchObject({ humanLabel: 'Ada Lovelace', scopes: ['posts:write'] });
      expect(result).toMatchObject({ expiresIn: 90 * 86_400 - 3 });
      expect(await agentInRoom(grant.agentId)).toMatchObject({ agentName: 'scout', humanLabel: 'Ada Lovelace', scopes: ['posts:write'] });
      const again = await problem(pollLater(deviceCode));
      expect(again).toMatchObject({ slug: 'signup-unknown', status: 400 });
      expect(await tokens.authenticate(grant.accessToken)).toMatchObject({
        tokenId: grant.tokenId,
        agentId: grant.agentId,
        agentName: 'scout',
        humanLabel: 'Ada Lovelace',
        scopes: ['posts:write'],
      });
    });

    it('delivers the token to exactly one of 20 concurrent polls', async () => {
      const { deviceCode, userCode } = await start();
      await flows.approve(userCode, ada);
      const answers = await Promise.allSettled(Array.from({ length: 20 }, () => flows.poll(deviceCode)));
      const delivered = answers.filter((a) => a.status === 'fulfilled').map((a) => completed(a.value));
      expect(delivered).toHaveLength(1);
      const refused = answers.flatMap((a) => (a.status === 'rejected' ? [(a.reason as DomainError).slug] : []));
      expect(refused.every((slug) => slug === 'slow-down' || slug === 'signup-unknown')).toBe(true);
      expect((await problem(pollLater(deviceCode))).slug).toBe('signup-unknown');
    });

    it('answers signup-declined once the human declines, then forgets the flow', async () => {
      const { deviceCode, userCode } = await start();
      expect(await flows.decline(userCode, ada)).toMatchObject({ agentName: 'scout' });
      expect((await problem(flows.approve(userCode, ada))).slug).toBe('user-code-unknown');
      const declined = await problem(pollLater(deviceCode));
      expect(declined).toMatchObject({ slug: 'signup-declined', status: 400 });
      expect((await problem(pollLater(deviceCode))).slug).toBe('signup-unknown');
    });

    it('expires at 900 seconds: signup-expired for the agent (on every poll), an unknown code for the human', async () => {
      const { deviceCode, userCode } = await start();
      time += 897 * SECOND;
      expect(await flows.poll(deviceCode)).toEqual({ status: 'pending' });
      time += 2.999 * SECOND;
      expect((await flows.describe(userCode, ada)).userCode).toBe(userCode);
      time += 0.001 * SECOND;
      expect((await problem(flows.describe(userCode, ada))).slug).toBe('user-code-unknown');
      expect((await problem(flows.approve(userCode, ada))).slug).toBe('user-code-unknown');
      const expired = await problem(flows.poll(deviceCode));
      expect(expired).toMatchObject({ slug: 'signup-expired', status: 400 });
      expect((await problem(pollLater(deviceCode))).slug).toBe('signup-expired');
    });

    it('still delivers a token approved just before expiry to a poll just after it', async () => {
      const { deviceCode, userCode } = await start();
      time += 899 * SECOND;
      await flows.approve(userCode, ada);
      time += 10 * SECOND;
      expect(completed(await flows.poll(deviceCode)).accessToken).toMatch(/^agt_/);
    });

    it('answers signup-unknown for a device code nobody issued', async () => {
      const error = await problem(flows.poll('no-such-device-code'));
      expect(error).toMatchObject({ slug: 'signup-unknown', status: 400 });
    });
  });

  describe('the human step', () => {
    it('takes the user code case-insensitively, ignoring dashes and spaces', async () => {
      const { userCode } = await start();
      for (const typed of [userCode, userCode.toLowerCase(), ` ${userCode.replace('-', ' ')} `, userCode.replace('-', ''), userCode.split('').join(' ')]) {
        expect((await flows.describe(typed, ada)).userCode).toBe(userCode);
      }
    });

    it.each(['', 'BCDF-GHJA', 'BCDF-GHJ', 'BCDF-GHJKL', 'BCDF_GHJK', 'BCDF-GHJ1', 'BCDF.GHJK'])('says nothing but "unknown" for %j', async (typed) => {
      await start();
      const error = await problem(flows.describe(typed, ada));
      expect(error).toMatchObject({ slug: 'user-code-unknown', status: 404, fields: { parameter: 'user_code' } });
    });

    it('approves a flow once, whatever the number of concurrent approvals: one agent, one token', async () => {
      const { deviceCode, userCode } = await start(['agents:read'], { agentName: 'double clicked' });
      const answers = await Promise.allSettled(Array.from({ length: 20 }, () => flows.approve(userCode, ada)));
      expect(answers.filter((a) => a.status === 'fulfilled')).toHaveLength(1);
      for (const a of answers) if (a.status === 'rejected') expect((a.reason as DomainError).slug).toBe('user-code-unknown');
      const grant = completed(await pollLater(deviceCode));
      const mine = (await approvedBy(ada.id)).filter((t) => t.agentName === 'double clicked');
      expect(mine.map((t) => t.id)).toEqual([grant.tokenId]);
      const inRoom = (await agentsInRoom()).filter((a) => a.agentName === 'double clicked' && a.id === grant.agentId);
      expect(inRoom).toHaveLength(1);
    });

    it('keeps the flow pending when the room cannot be reached, so the human can approve again', async () => {
      const deadRoom = new RoomGateway(`127.0.0.1:${await freePort()}`, 500);
      const cutOff = new DeviceFlows({ store, tokens, room: deadRoom, clock });
      const { deviceCode, userCode } = await start();
      expect((await problem(cutOff.approve(userCode, ada))).slug).toBe('unavailable');
      deadRoom.close();
      expect(await flows.poll(deviceCode)).toEqual({ status: 'pending' });
      await flows.approve(userCode, ada);
      expect(completed(await pollLater(deviceCode)).humanLabel).toBe('Ada Lovelace');
      expect(await approvedBy(ada.id)).toHaveLength(1);
    });

    it('limits wrong codes to 10 per 15 minutes per session, with Retry-After until the window ends', async () => {
      const limiter = new AttemptLimiter({ store, clock });
      const client = { session: 's1', address: '127.0.0.1' };
      for (let i = 0; i < 10; i += 1) {
        await limiter.guard(client);
        await limiter.fail(client);
        time += 30 * SECOND;
      }
      const error = await problem(limiter.guard(client));
      expect(error).toMatchObject({ slug: 'too-many-attempts', status: 429, fields: { retry_after: 15 * 60 - 300 } });
      // Another session from the same address is not locked out: ten wrong codes are well within the address's burst.
      await limiter.guard({ session: 'other', address: '127.0.0.1' });
      time += 600 * SECOND - 1;
      await problem(limiter.guard(client));
      time += 1;
      await expect(limiter.guard(client)).resolves.toBeUndefined();
    });

    it('blocks 10,000 wrong codes from one address (a new session every 10), while the right human approves from another address and a neighbour waits seconds', async () => {
      const limiter = new AttemptLimiter({ store, clock });
      const startedAt = time;
      let looked = 0;
      let refused = 0;
      let longestWait = 0;
      for (let i = 0; i < 10_000; i += 1) {
        // A guesser with fresh sessions, ten wrong codes each (the most one session may type), ten a second.
        const client = { session: `guess-${Math.floor(i / 10)}`, address: '203.0.113.7' };
        time += 100;
        try {
          await limiter.guard(client);
        } catch (error) {
          expect(error).toMatchObject({ slug: 'too-many-attempts', status: 429 });
          longestWait = Math.max(longestWait, (error as DomainError).fields.retry_after ?? 0);
          refused += 1;
          continue;
        }
        looked += 1;
        // Never the right code: the guesser's codes are all wrong.
        const wrong = (await problem(flows.approve(i % 2 === 0 ? 'BBBB-BBBB' : 'CCCC-CCCC', grace))).slug;
        expect(wrong).toBe('user-code-unknown');
        await limiter.fail(client);
      }
      const elapsedSeconds = (time - startedAt) / 1000;
      // The burst, then one every 20 seconds: 30 + 1000/20 = 80 codes looked up of 10,000.
      expect(looked).toBeLessThanOrEqual(30 + Math.ceil(elapsedSeconds / 20) + 1);
      expect(refused).toBeGreaterThanOrEqual(10_000 - 81);
      expect(longestWait).toBeGreaterThanOrEqual(1);
      expect(longestWait).toBeLessThanOrEqual(20);

      // The right human, from another address, approves at once.
      const { deviceCode, userCode } = await start(['posts:write'], { agentName: 'the real one' });
      await limiter.guard({ session: 'ada', address: '198.51.100.2' });
      await flows.approve(userCode, ada);
      expect(completed(await pollLater(deviceCode)).humanLabel).toBe('Ada Lovelace');

      // A neighbour behind the guesser's address waits seconds at most, not a quarter of an hour.
      const neighbour = { session: 'neighbour', address: '203.0.113.7' };
      const refusal = await limiter.guard(neighbour).then(
        () => undefined,
        (error: unknown) => error as DomainError,
      );
      const wait = refusal?.fields.retry_after ?? 0;
      expect(wait).toBeLessThanOrEqual(20);
      time += wait * SECOND;
      await expect(limiter.guard(neighbour)).resolves.toBeUndefined();
    }, 60_000);
  });

  describe('widening: the same agent, more scopes', () => {
    it('makes a new token for the same agent, approvable only by its human; the old token keeps its scopes', async () => {
      const first = await signUp(['posts:write']);
      const wider = await start(['messages:read'], { agentName: 'ignored', bearerToken: first.accessToken });
      expect(await flows.describe(wider.userCode, ada)).toEqual({
        userCode: wider.userCode,
        agentName: 'scout',
        scopes: ['messages:read'],
        widening: {
          agentId: first.agentId,
          agentName: 'scout',
          approvedBy: ada.id,
          approvedAt: new Date(time - 3 * SECOND).toISOString(),
          heldScopes: ['posts:write'],
        },
      });
      for (const attempt of [flows.describe(wider.userCode, grace), flows.approve(wider.userCode, grace), flows.decline(wider.userCode, grace)]) {
        const refused = await problem(attempt);
        expect(refused).toMatchObject({ slug: 'not-the-approver', status: 400 });
      }

      await flows.approve(wider.userCode, ada);
      const second = completed(await pollLater(wider.deviceCode));
      expect(second.agentId).toBe(first.agentId);
      expect(await tokens.authenticate(second.accessToken)).toMatchObject({ agentId: first.agentId, agentName: 'scout', scopes: ['messages:read'] });
      expect((await tokens.authenticate(first.accessToken)).scopes).toEqual(['posts:write']);
      expect((await agentInRoom(first.agentId))?.scopes).toEqual(['posts:write', 'messages:read']);
    });

    it('narrows the agent record again when a token is revoked: its scopes are the union of live tokens', async () => {
      const first = await signUp(['posts:write']);
      const second = await signUp(['messages:write'], ada, { bearerToken: first.accessToken });
      expect((await agentInRoom(first.agentId))?.scopes).toEqual(['posts:write', 'messages:write']);
      await tokens.revoke(second.accessToken);
      expect((await agentInRoom(first.agentId))?.scopes).toEqual(['posts:write']);
      await tokens.revokeForHuman(ada.id, first.tokenId);
      expect((await agentInRoom(first.agentId))?.scopes).toEqual([]);
    });

    it('refuses to widen with a token that does not work: unknown, malformed, revoked or expired', async () => {
      expect((await problem(start(['posts:write'], { bearerToken: mintToken() }))).slug).toBe('token-invalid');
      expect((await problem(start(['posts:write'], { bearerToken: 'agt_nope' }))).slug).toBe('token-invalid');
      const revoked = await signUp();
      await tokens.revoke(revoked.accessToken);
      expect((await problem(start(['posts:write'], { bearerToken: revoked.accessToken }))).slug).toBe('token-invalid');
      const old = await signUp();
      time += 90 * DAY;
      expect((await problem(start(['posts:write'], { bearerToken: old.accessToken }))).slug).toBe('token-expired');
    });
  });

  describe('provisioning by an operator', () => {
    const provision = (more: { humanName?: string; agentName?: string; scopes?: string[]; reason?: string } = {}): ReturnType<DeviceFlows['provision']> =>
      flows.provision({
        humanName: more.humanName ?? 'Ada Lovelace',
        agentName: more.agentName ?? 'load-001',
        scopes: more.scopes ?? ['posts:write'],
        reason: more.reason ?? 'k6 load test',
      });

    it('makes an approved agent in the room and a working token, the record marked with the reason, listed for the human', async () => {
      const made = await provision({
        humanName: '  ada \t LOVELACE ',
        agentName: ' load   001 ',
        scopes: ['messages:read', 'posts:write', 'messages:read'],
        reason: '  k6   load test ',
      });
      expect(made).toMatchObject({ agentName: 'load 001', human: 'Ada Lovelace', scopes: ['posts:write', 'messages:read'], expiresAt: time + 90 * DAY });
      expect(made.token).toMatch(/^agt_[0-9A-Za-z]{49}$/);
      expect(await tokens.authenticate(made.token)).toMatchObject({
        agentId: made.agentId,
        tokenId: made.tokenId,
        agentName: 'load 001',
        humanLabel: 'Ada Lovelace',
      });
      expect(await agentInRoom(made.agentId)).toMatchObject({ agentName: 'load 001', humanLabel: 'Ada Lovelace', scopes: ['posts:write', 'messages:read'] });
      const [listed] = (await tokens.pageOfHuman(ada.id, 'provisioned', 50)).tokens;
      expect(await approvedBy(ada.id)).toEqual([]);
      expect(listed).toMatchObject({ id: made.tokenId, provisioned: { reason: 'k6 load test', at: time } });
      expect(JSON.stringify(listed)).not.toContain(made.token);
      // The human revokes it like any agent they approved.
      await tokens.revokeForHuman(ada.id, made.tokenId);
      expect((await problem(tokens.authenticate(made.token))).slug).toBe('token-invalid');
    });

    it('leaves approvals unmarked', async () => {
      const grant = await signUp();
      expect(await store.tokenById(grant.tokenId)).not.toHaveProperty('provisioned');
    });

    it('refuses a human without an account (not-found, naming where humans register), and makes nothing', async () => {
      const before = (await agentsInRoom()).map((a) => a.id);
      const error = await problem(provision({ humanName: 'Nobody Here' }));
      expect(error).toMatchObject({ slug: 'not-found', fields: { parameter: 'human_name' } });
      expect(error.detail).toBe('No human is named "Nobody Here" here; humans register themselves at /signin.');
      expect((await agentsInRoom()).map((a) => a.id)).toEqual(before);
    });

    it.each([
      [{ scopes: [] }, 'invalid-scope', 'scopes'],
      [{ scopes: ['posts:write', 'admin'] }, 'invalid-scope', 'scopes'],
      [{ agentName: '  ' }, 'invalid-request', 'agent_name'],
      [{ agentName: 'x'.repeat(101) }, 'invalid-request', 'agent_name'],
      [{ reason: ' ' }, 'invalid-request', 'reason'],
      [{ reason: 'r'.repeat(201) }, 'invalid-request', 'reason'],
      [{ reason: 'bell\u0007' }, 'invalid-request', 'reason'],
      [{ humanName: '' }, 'invalid-request', 'human_name'],
    ])('refuses %j with %s on %s, before anything is made', async (input, slug, parameter) => {
      expect(await problem(provision(input))).toMatchObject({ slug, fields: { parameter } });
      expect((await tokens.pageOfHuman(ada.id, 'provisioned', 50)).total).toBe(0);
    });
  });

  describe('tokens', () => {
    it('expire after TOKEN_TTL_DAYS with token-expired, and are stored only as hashes', async () => {
      const grant = await signUp();
      const approvedAt = time - 3 * SECOND;
      const { expiresAt } = await tokens.authenticate(grant.accessToken);
      expect(Date.parse(expiresAt) - approvedAt).toBe(90 * DAY);
      expect(JSON.stringify(await store.tokenById(grant.tokenId))).not.toContain(grant.accessToken);
      time = Date.parse(expiresAt) - 1;
      await expect(tokens.authenticate(grant.accessToken)).resolves.toBeDefined();
      time += 1;
      const expired = await problem(tokens.authenticate(grant.accessToken));
      expect(expired).toMatchObject({ slug: 'token-expired', status: 401 });
      expect(await approvedBy(ada.id)).toEqual([]);
    });

    it('stop working once revoked by the agent; revoking again, or revoking an unknown token, succeeds', async () => {
      const grant = await signUp();
      await tokens.revoke(grant.accessToken);
      expect((await problem(tokens.authenticate(grant.accessToken))).slug).toBe('token-invalid');
      await expect(tokens.revoke(grant.accessToken)).resolves.toBeUndefined();
      await expect(tokens.revoke(mintToken())).resolves.toBeUndefined();
      await expect(tokens.revoke('not a token')).resolves.toBeUndefined();
    });

    it('are listed for the human who approved them, who alone can revoke them by id', async () => {
      const older = await signUp(['posts:write'], ada, { agentName: 'first' });
      time += SECOND;
      const newer = await signUp(['agents:read'], ada, { agentName: 'second' });
      await signUp(['agents:read'], grace, { agentName: 'not hers' });
      expect((await approvedBy(ada.id)).map((t) => [t.agentName, t.scopes])).toEqual([
        ['second', ['agents:read']],
        ['first', ['posts:write']],
      ]);
      expect((await problem(tokens.revokeForHuman(grace.id, older.tokenId))).slug).toBe('not-found');
      expect((await problem(tokens.revokeForHuman(ada.id, 'tok_nothing'))).slug).toBe('not-found');
      expect((await tokens.revokeForHuman(ada.id, older.tokenId)).revokedAt).toBe(time);
      expect((await problem(tokens.authenticate(older.accessToken))).slug).toBe('token-invalid');
      expect((await approvedBy(ada.id)).map((t) => t.id)).toEqual([newer.tokenId]);
    });

    it('refuse a token with a wrong checksum before any store lookup', async () => {
      const { accessToken } = await signUp();
      const before = lookups;
      const mangled = `${accessToken.slice(0, -1)}${accessToken.endsWith('a') ? 'b' : 'a'}`;
      for (const bad of [mangled, 'agt_short', '', `Bearer ${accessToken}`, accessToken.toUpperCase()]) {
        expect((await problem(tokens.authenticate(bad))).slug).toBe('token-invalid');
      }
      expect(lookups).toBe(before);
      await tokens.authenticate(accessToken);
      expect(lookups).toBe(before + 1);
    });
  });

  describe('humans', () => {
    it('verify passwords hashed with scrypt and a salt of their own, and refuse a taken name', async () => {
      expect((await humans.verify('ada lovelace', 'correct horse'))?.id).toBe(ada.id);
      expect(await humans.verify('Ada Lovelace', 'wrong password')).toBeUndefined();
      expect(await humans.verify('Nobody', 'correct horse')).toBeUndefined();
      expect(ada.passwordHash).toMatch(/^scrypt\$1024\$8\$3\$[\w-]{22}\$[\w-]{86}$/);
      expect(ada.passwordHash).not.toContain('correct horse');
      const twin = await humans.register('Ada Twin', 'correct horse');
      expect(twin.passwordHash).not.toBe(ada.passwordHash);
      expect(await problem(humans.register(' ADA  LOVELACE ', 'another one'))).toMatchObject({ slug: 'name-taken', fields: { parameter: 'name' } });
    });

    it.each([
      ['', 'a long password', 'name'],
      ['x'.repeat(101), 'a long password', 'name'],
      ['Short Password', 'seven77', 'password'],
    ])('refuse to register %j with password %j', async (name, password, parameter) => {
      expect(await problem(humans.register(name, password))).toMatchObject({ slug: 'invalid-request', fields: { parameter } });
    });

    it('open sessions whose cookie value is stored only as a hash, until closed or 7 days pass', async () => {
      const { sessionId, session } = await humans.openSession(ada.id);
      expect(session.idHash).not.toBe(sessionId);
      expect(session.csrf).toMatch(/^[\w-]{32}$/);
      expect(await store.session(sessionId)).toBeUndefined();
      expect((await humans.session(sessionId))?.human.name).toBe('Ada Lovelace');
      await humans.closeSession(sessionId);
      expect(await humans.session(sessionId)).toBeUndefined();

      const lasting = await humans.openSession(grace.id);
      time += 7 * DAY - 1;
      expect((await humans.session(lasting.sessionId))?.human.id).toBe(grace.id);
      time += 1;
      expect(await humans.session(lasting.sessionId)).toBeUndefined();
    });
  });
});
