import { networkInterfaces } from 'node:os';
import * as grpc from '@grpc/grpc-js';
import { loadConfig } from '@agentroom/kit/config';
import { mintToken, SCOPES, SIGNUP_EXPIRES_IN_SECONDS, SIGNUP_POLL_INTERVAL_SECONDS } from '@agentroom/kit/domain';
import { CLIENT_OPTIONS, HealthChecker, unaryCall } from '@agentroom/kit/grpc';
import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { DomainError } from '@agentroom/kit/problems';
import { type Clock, connectRedis, type Redis } from '@agentroom/kit/store';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import {
  type AuthenticateTokenResponse__Output,
  authProto,
  type AuthServiceClient,
  type GetAgentResponse__Output,
  type PollDeviceFlowResponse__Output,
  type ResolveSessionResponse__Output,
  type RevokeTokenResponse__Output,
  roomProto,
  type RoomServiceClient,
  type StartDeviceFlowResponse__Output,
  type WatchRevocationsResponse__Output,
} from '@agentroom/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authEnv, type RunningAuth, start } from '../src/index.js';
import type { Human } from '../src/records.js';
import { AUTH_SERVICE_NAME, isLoopbackPeer } from '../src/server.js';

const DEADLINE = 2_000;
const env = { SITE_URL: 'http://room.test', LOG_LEVEL: 'silent', SHUTDOWN_GRACE_MS: '1000', PASSWORD_HASH_COST: '1024' } as const;

let redisServer: LocalRedis;
/** A second connection to auth's Redis, to count the commands auth sends. */
let observer: Redis;
/** The room service, its own process, as auth meets it in production: over gRPC. */
let room: ServiceProcess;
let auth: RunningAuth;
let client: AuthServiceClient;
let roomClient: RoomServiceClient;
let ada: Human;
let grace: Human;

/** Auth's clock: the tests move it past the poll interval instead of sleeping. */
let time = Date.parse('2026-11-22T12:00:00Z');
const clock: Clock = { now: () => time };

beforeAll(async () => {
  redisServer = await startRedisServer();
  observer = connectRedis(redisServer.url, 'auth-grpc-test');
  room = await startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env });
  // Every interface, so one test can call from an address that is not loopback.
  auth = await start(
    loadConfig(authEnv, { ...env, AUTH_GRPC_ADDR: '0.0.0.0:0', ROOM_ADDR: `127.0.0.1:${room.port}`, REDIS_URL: redisServer.url, REDIS_KEY_PREFIX: 'grpc' }),
    {
      clock,
    },
  );
  client = new (authProto().AuthService)(`127.0.0.1:${auth.port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  roomClient = new (roomProto().RoomService)(`127.0.0.1:${room.port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  ada = await auth.humans.register('Ada Lovelace', 'correct horse');
  grace = await auth.humans.register('Grace Hopper', 'battery staple');
});

afterAll(async () => {
  client.close();
  roomClient.close();
  await auth.stop();
  await room.stop();
  await observer.quit();
  await redisServer.stop();
});

function startFlow(scopes: string[], more: { agentName?: string; clientId?: string; bearerToken?: string } = {}): Promise<StartDeviceFlowResponse__Output> {
  const request = { scopes, agentName: more.agentName ?? '', clientId: more.clientId ?? '', bearerToken: more.bearerToken ?? '' };
  return unaryCall(DEADLINE, (metadata, options, callback) => client.startDeviceFlow(request, metadata, options, callback));
}

function poll(deviceCode: string): Promise<PollDeviceFlowResponse__Output> {
  return unaryCall(DEADLINE, (metadata, options, callback) => client.pollDeviceFlow({ deviceCode }, metadata, options, callback));
}

function authenticate(token: string): Promise<AuthenticateTokenResponse__Output> {
  return unaryCall(DEADLINE, (metadata, options, callback) => client.authenticateToken({ token }, metadata, options, callback));
}

function revoke(token: string): Promise<RevokeTokenResponse__Output> {
  return unaryCall(DEADLINE, (metadata, options, callback) => client.revokeToken({ token }, metadata, options, callback));
}

function resolveSession(sessionId: string): Promise<ResolveSessionResponse__Output> {
  return unaryCall(DEADLINE, (metadata, options, callback) => client.resolveSession({ sessionId }, metadata, options, callback));
}

function getAgent(agentId: string): Promise<GetAgentResponse__Output> {
  return unaryCall(DEADLINE, (metadata, options, callback) => roomClient.getAgent({ agentId }, metadata, options, callback));
}

async function rejection(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DomainError);
  return error as DomainError;
}

/** The gRPC status a call fails with, read from the raw callback. */
function statusOf(call: (callback: (error: grpc.ServiceError | null) => void) => void): Promise<grpc.status> {
  return new Promise((resolve) => call((error) => resolve(error?.code ?? grpc.status.OK)));
}

/** An agent's whole signup over gRPC, the human approving in-process as the pages do. */
async function signUp(scopes: string[], human = ada, more: { agentName?: string; bearerToken?: string } = {}): Promise<PollDeviceFlowResponse__Output> {
  const started = await startFlow(scopes, more);
  await auth.flows.approve(started.userCode, human);
  const done = await poll(started.deviceCode);
  expect(done.status).toBe('FLOW_STATUS_COMPLETED');
  return done;
}

/** How many GET commands auth's Redis has run: a token lookup is one. */
async function redisGets(): Promise<number> {
  const stats = await observer.info('commandstats');
  return Number(/cmdstat_get:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

describe('AuthService over a loopback socket', () => {
  it('reports SERVING on the standard health check', async () => {
    const health = new HealthChecker(`127.0.0.1:${auth.port}`);
    expect(await health.check(AUTH_SERVICE_NAME)).toBe('SERVING');
    health.close();
  });

  it('starts a device flow: a device code, an XXXX-XXXX user code, 900 s, 3 s, the scopes', async () => {
    const started = await startFlow(['posts:write', 'agents:read'], { agentName: 'scout' });
    expect(started).toMatchObject({ expiresIn: SIGNUP_EXPIRES_IN_SECONDS, interval: SIGNUP_POLL_INTERVAL_SECONDS, scopes: ['agents:read', 'posts:write'] });
    expect(started.deviceCode).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(started.userCode).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
  });

  it('refuses unknown scopes with INVALID_ARGUMENT and the four valid ones as a field', async () => {
    const error = await rejection(startFlow(['posts:write', 'root']));
    expect(error).toMatchObject({ slug: 'invalid-scope', status: 400, fields: { parameter: 'scopes', valid_scopes: [...SCOPES] } });
    const code = await statusOf((callback) => client.startDeviceFlow({ scopes: [] }, callback));
    expect(code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((await rejection(startFlow(Array.from({ length: 21 }, () => 'posts:write')))).slug).toBe('invalid-scope');
  });

  it('polls pending, slow-down with Retry-After, then the token once; the approval made the agent in the room', async () => {
    const started = await startFlow(['posts:write'], { agentName: 'scout' });
    expect(await poll(started.deviceCode)).toMatchObject({ status: 'FLOW_STATUS_PENDING', accessToken: '' });
    time += 1_000;
    const tooFast = await rejection(poll(started.deviceCode));
    expect(tooFast).toMatchObject({ slug: 'slow-down', status: 429, fields: { retry_after: 2 } });
    expect(await statusOf((callback) => client.pollDeviceFlow({ deviceCode: started.deviceCode }, callback))).toBe(grpc.status.RESOURCE_EXHAUSTED);

    await auth.flows.approve(started.userCode, ada);
    time += 3_000;
    const done = await poll(started.deviceCode);
    expect(done).toMatchObject({ status: 'FLOW_STATUS_COMPLETED', scopes: ['posts:write'], human: 'Ada Lovelace', expiresIn: 90 * 86_400 - 3 });
    expect(done.accessToken).toMatch(/^agt_[0-9A-Za-z]{49}$/);
    const { agent } = await getAgent(done.agentId);
    expect(agent).toMatchObject({ id: done.agentId, agentName: 'scout', humanLabel: 'Ada Lovelace', scopes: ['posts:write'] });

    time += 3_000;
    const again = await rejection(poll(started.deviceCode));
    expect(again).toMatchObject({ slug: 'signup-unknown', status: 400 });
  });

  it('answers a declined flow with signup-declined, an unknown one with signup-unknown, an empty one with invalid-request', async () => {
    const started = await startFlow(['agents:read']);
    await auth.flows.decline(started.userCode, ada);
    expect((await rejection(poll(started.deviceCode))).slug).toBe('signup-declined');
    expect((await rejection(poll('never-issued'))).slug).toBe('signup-unknown');
    expect(await rejection(poll(''))).toMatchObject({ slug: 'invalid-request', fields: { parameter: 'device_code' } });
  });

  it('authenticates a token from the flow to its agent and frozen scopes; a revoked one fails token-invalid', async () => {
    const done = await signUp(['posts:write', 'messages:read'], ada, { agentName: 'reader' });
    const principal = await authenticate(done.accessToken);
    expect(principal).toMatchObject({ agentId: done.agentId, agentName: 'reader', humanLabel: 'Ada Lovelace', scopes: ['posts:write', 'messages:read'] });
    expect(principal.tokenId).toMatch(/^tok_/);
    expect(Date.parse(principal.expiresAt)).toBe(time + 90 * 86_400_000);

    expect(await revoke(done.accessToken)).toEqual({});
    const revoked = await rejection(authenticate(done.accessToken));
    expect(revoked).toMatchObject({ slug: 'token-invalid', status: 401 });
    const raw = await new Promise<grpc.ServiceError>((resolve) =>
      client.authenticateToken({ token: done.accessToken }, (error) => resolve(error as grpc.ServiceError)),
    );
    expect(raw.code).toBe(grpc.status.UNAUTHENTICATED);
    // Across gRPC a problem is a slug and fields: no HTTP status, no remedy, no URL of any protocol.
    const trailer = JSON.parse(String(raw.metadata.get('agentroom-problem-bin')[0])) as Record<string, unknown>;
    expect(Object.keys(trailer).sort()).toEqual(['detail', 'fields', 'slug']);
    expect(JSON.stringify(trailer)).not.toMatch(/remedy|http|401|Retry-After/);
    // RFC 7009: revoking again, an unknown token, or garbage all succeed.
    for (const token of [done.accessToken, mintToken(), 'garbage', '']) expect(await revoke(token)).toEqual({});
    expect((await getAgent(done.agentId)).agent?.scopes).toEqual([]);
  });

  it('tells a watcher, once positioned, of every token revoked from then on, by the agent or by its human, with heartbeats between', async () => {
    const first = await signUp(['posts:write'], ada, { agentName: 'first' });
    const second = await signUp(['posts:write'], ada, { agentName: 'second' });
    const [p1, p2] = [await authenticate(first.accessToken), await authenticate(second.accessToken)];
    const call = client.watchRevocations({});
    const messages: WatchRevocationsResponse__Output[] = [];
    call.on('data', (message: WatchRevocationsResponse__Output) => messages.push(message));
    call.on('error', () => undefined);
    // Initial metadata: from here on every revocation reaches this watcher.
    await new Promise((resolve) => call.once('metadata', resolve));
    await revoke(first.accessToken);
    await auth.tokens.revokeForHuman(ada.id, p2.tokenId);
    // Revoking again publishes nothing: the token was already revoked.
    await revoke(first.accessToken);
    const revocations = (): unknown[] => messages.flatMap((message) => (message.revocation ? [message.revocation] : []));
    // A heartbeat after the second revocation: the feed was read past anything the third call could have published.
    const heartbeatAfterSecond = (): boolean => {
      let seen = 0;
      for (const message of messages) {
        if (message.revocation) seen += 1;
        else if (seen >= 2) return true;
      }
      return false;
    };
    while (!heartbeatAfterSecond()) await new Promise((resolve) => setTimeout(resolve, 20));
    const at = new Date(time).toISOString();
    expect(revocations()).toEqual([
      { id: expect.stringMatching(/^\d+-\d+$/), tokenId: p1.tokenId, agentId: first.agentId, revokedAt: at },
      { id: expect.stringMatching(/^\d+-\d+$/), tokenId: p2.tokenId, agentId: second.agentId, revokedAt: at },
    ]);
    call.cancel();
  });

  it('ends a watch UNAVAILABLE when its replica loses Redis, so the watcher knows revocations may pass unseen', async () => {
    const doomed = await startRedisServer();
    const replica = await start(loadConfig(authEnv, { ...env, AUTH_GRPC_ADDR: '127.0.0.1:0', ROOM_ADDR: `127.0.0.1:${room.port}`, REDIS_URL: doomed.url }), {
      clock,
    });
    const other = new (authProto().AuthService)(`127.0.0.1:${replica.port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
    try {
      const call = other.watchRevocations({});
      call.on('data', () => undefined);
      const ended = new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
      await new Promise((resolve) => call.once('metadata', resolve));
      await doomed.stop();
      expect((await ended).code).toBe(grpc.status.UNAVAILABLE);
    } finally {
      other.close();
      await replica.stop().catch(() => undefined);
      await doomed.stop();
    }
  });

  it('fails a token with a bad checksum without a store lookup', async () => {
    const { accessToken } = await signUp(['posts:write']);
    const mangled = `${accessToken.slice(0, -1)}${accessToken.endsWith('a') ? 'b' : 'a'}`;
    const before = await redisGets();
    expect((await rejection(authenticate(mangled))).slug).toBe('token-invalid');
    expect((await rejection(authenticate('agt_short'))).slug).toBe('token-invalid');
    expect(await redisGets()).toBe(before);
    await authenticate(accessToken);
    // A well-formed one reads its record, then its agent's suspension.
    expect(await redisGets()).toBe(before + 2);
  });

  it('fails an expired token with token-expired', async () => {
    const { accessToken } = await signUp(['agents:read']);
    time += 90 * 86_400_000;
    const error = await rejection(authenticate(accessToken));
    expect(error).toMatchObject({ slug: 'token-expired', status: 401 });
  });

  it('widens an agent with its own token: same agent, new token, old token unchanged; only its human approves', async () => {
    const first = await signUp(['posts:write'], ada, { agentName: 'grower' });
    const wider = await startFlow(['messages:write'], { agentName: 'renamed?', bearerToken: first.accessToken });
    const refused = await rejection(auth.flows.approve(wider.userCode, grace));
    expect(refused.slug).toBe('not-the-approver');
    await auth.flows.approve(wider.userCode, ada);
    time += 3_000;
    const second = await poll(wider.deviceCode);
    expect(second).toMatchObject({ status: 'FLOW_STATUS_COMPLETED', agentId: first.agentId, scopes: ['messages:write'] });
    expect((await authenticate(first.accessToken)).scopes).toEqual(['posts:write']);
    expect(await authenticate(second.accessToken)).toMatchObject({ agentId: first.agentId, agentName: 'grower', scopes: ['messages:write'] });
    expect((await getAgent(first.agentId)).agent).toMatchObject({ agentName: 'grower', scopes: ['posts:write', 'messages:write'] });
  });

  it('refuses to start a widening with a token that does not work', async () => {
    expect(await rejection(startFlow(['posts:write'], { bearerToken: mintToken() }))).toMatchObject({ slug: 'token-invalid', status: 401 });
    expect((await rejection(startFlow(['posts:write'], { bearerToken: 'x'.repeat(2_000) }))).slug).toBe('token-invalid');
  });

  it('resolves a sign-in cookie to its human, the CSRF token and the agents with a live token; signed out otherwise', async () => {
    const linus = await auth.humans.register('Linus Room', 'a long password');
    const { sessionId, session } = await auth.humans.openSession(linus.id);
    const poster = await signUp(['posts:write'], linus, { agentName: 'poster' });
    await signUp(['messages:read'], linus, { agentName: 'poster', bearerToken: poster.accessToken });
    const gone = await signUp(['posts:write'], linus, { agentName: 'gone' });
    await revoke(gone.accessToken);
    await signUp(['posts:write'], grace, { agentName: 'not-linus' });

    const resolved = await resolveSession(sessionId);
    expect(resolved).toMatchObject({ humanId: linus.id, humanName: 'Linus Room', csrfToken: session.csrf });
    expect(resolved.agents).toEqual([
      { agentId: poster.agentId, agentName: 'poster', scopes: ['posts:write', 'messages:read'], provisioned: false, suspension: null },
    ]);
    expect(resolved.provisionedTotal).toBe(0);
    // Two approvals of poster (the second widened it), one of gone, revoked since.
    expect(resolved.approvedTotal).toBe(2);

    for (const unknown of ['', 'not-a-session', 'x'.repeat(43)]) expect(await resolveSession(unknown)).toMatchObject({ humanId: '', agents: [] });
    expect((await rejection(resolveSession('x'.repeat(2_000)))).slug).toBe('invalid-request');

    time += 8 * 86_400_000;
    expect((await resolveSession(sessionId)).humanId).toBe('');
    const again = await auth.humans.openSession(linus.id);
    expect((await resolveSession(again.sessionId)).humanId).toBe(linus.id);
    await auth.humans.closeSession(again.sessionId);
    expect((await resolveSession(again.sessionId)).humanId).toBe('');
  });
});

interface ProvisionRequest {
  humanName: string;
  agentName: string;
  scopes: string[];
  reason: string;
}

function provisionOn(on: AuthServiceClient, request: ProvisionRequest): Promise<unknown> {
  return unaryCall<unknown>(DEADLINE, (metadata, options, callback) => on.provisionAgent(request, metadata, options, callback));
}

/** This machine's first address that is not loopback: calls from it reach auth from "outside". */
function outsideAddress(): string {
  const found = Object.values(networkInterfaces())
    .flat()
    .find((entry) => entry !== undefined && !entry.internal && entry.family === 'IPv4');
  if (!found) throw new Error('this test needs a network interface besides loopback (an IPv4 address) to call from');
  return found.address;
}

describe('ProvisionAgent', () => {
  const request = (more: Partial<ProvisionRequest> = {}): ProvisionRequest => ({
    humanName: 'grace hopper',
    agentName: 'load-1',
    scopes: ['posts:write', 'agents:read'],
    reason: 'k6 load test',
    ...more,
  });

  it("answers an approved agent and its token, made in the room and marked on the human's token list", async () => {
    const made = (await provisionOn(client, request())) as {
      agentId: string;
      agentName: string;
      accessToken: string;
      scopes: string[];
      human: string;
      tokenId: string;
      expiresAt: string;
    };
    expect(made).toMatchObject({ agentName: 'load-1', human: 'Grace Hopper', scopes: ['agents:read', 'posts:write'] });
    expect(Date.parse(made.expiresAt)).toBe(time + 90 * 86_400_000);
    expect(await authenticate(made.accessToken)).toMatchObject({
      agentId: made.agentId,
      tokenId: made.tokenId,
      humanLabel: 'Grace Hopper',
      scopes: ['agents:read', 'posts:write'],
    });
    expect((await getAgent(made.agentId)).agent).toMatchObject({ agentName: 'load-1', humanLabel: 'Grace Hopper' });
    const record = (await auth.tokens.pageOfHuman(grace.id, 'provisioned', 50)).tokens.find((t) => t.id === made.tokenId);
    expect(record?.provisioned).toEqual({ reason: 'k6 load test', at: time });
  });

  it("bounds a session's agents: the human's own, then the newest 50 provisioned ones, marked, with how many there are", async () => {
    const hedy = await auth.humans.register('Hedy Many', 'a long password');
    const own = await signUp(['posts:write'], hedy, { agentName: 'her own' });
    const made: string[] = [];
    for (let i = 1; i <= 60; i += 1) {
      made.push(((await provisionOn(client, request({ humanName: 'Hedy Many', agentName: `load-${i}` }))) as { agentId: string }).agentId);
      time += 1;
    }
    const { sessionId } = await auth.humans.openSession(hedy.id);
    const resolved = await resolveSession(sessionId);
    expect(resolved.provisionedTotal).toBe(60);
    expect(resolved.approvedTotal).toBe(1);
    expect(resolved.agents[0]).toEqual({ agentId: own.agentId, agentName: 'her own', scopes: ['posts:write'], provisioned: false, suspension: null });
    const provisioned = resolved.agents.slice(1);
    expect(provisioned.every((agent) => agent.provisioned)).toBe(true);
    expect(provisioned.map((agent) => agent.agentId)).toEqual(made.slice(10).reverse());
  });

  it('fails NOT_FOUND for a human without an account, naming where humans register', async () => {
    const error = await rejection(provisionOn(client, request({ humanName: 'Nobody' })));
    expect(error).toMatchObject({
      slug: 'not-found',
      detail: 'No human is named "Nobody" here; humans register themselves at http://room.test/signin.',
      fields: { parameter: 'human_name' },
    });
    expect(await statusOf((callback) => client.provisionAgent(request({ humanName: 'Nobody' }), callback))).toBe(grpc.status.NOT_FOUND);
  });

  it('fails INVALID_ARGUMENT for unknown or no scopes, and for a reason or name out of bounds', async () => {
    expect(await rejection(provisionOn(client, request({ scopes: ['posts:write', 'root'] })))).toMatchObject({
      slug: 'invalid-scope',
      fields: { parameter: 'scopes' },
    });
    expect((await rejection(provisionOn(client, request({ scopes: [] })))).slug).toBe('invalid-scope');
    expect((await rejection(provisionOn(client, request({ scopes: Array.from({ length: 21 }, () => 'posts:write') })))).slug).toBe('invalid-scope');
    expect(await rejection(provisionOn(client, request({ reason: 'x'.repeat(2_000) })))).toMatchObject({
      slug: 'invalid-request',
      fields: { parameter: 'reason' },
    });
    expect(await rejection(provisionOn(client, request({ agentName: '' })))).toMatchObject({ slug: 'invalid-request', fields: { parameter: 'agent_name' } });
    expect(await statusOf((callback) => client.provisionAgent(request({ reason: '' }), callback))).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it("refuses callers that are not on the auth process's loopback with PERMISSION_DENIED, and makes nothing", async () => {
    const outside = new (authProto().AuthService)(`${outsideAddress()}:${auth.port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
    const before = (await auth.tokens.pageOfHuman(grace.id, 'provisioned', 1)).total;
    const refused = await new Promise<grpc.ServiceError>((resolve) =>
      outside.provisionAgent(request({ agentName: 'from outside' }), (error) => resolve(error as grpc.ServiceError)),
    );
    outside.close();
    expect(refused.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(refused.details).toMatch(/only callers on the auth process's own loopback.*kubectl exec.*port-forward/);
    expect((await auth.tokens.pageOfHuman(grace.id, 'provisioned', 1)).total).toBe(before);
  });

  it.each([
    ['127.0.0.1:51234', true],
    ['127.8.9.10:1', true],
    ['::1:51234', true],
    ['[::1]:51234', true],
    ['::ffff:127.0.0.1:51234', true],
    ['ipv4:127.0.0.1:51234', true],
    ['10.0.0.7:51234', false],
    ['192.0.2.2:51234', false],
    ['::ffff:10.0.0.7:51234', false],
    ['fd00::2:51234', false],
    ['1127.0.0.1:5', false],
    ['unknown', false],
  ])('takes the peer %s for loopback: %s', (peer, loopback) => {
    expect(isLoopbackPeer(peer)).toBe(loopback);
  });
});
