import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { mintToken } from '@agentroom/kit/domain';
import { HealthChecker, type ServiceClient, serviceClient } from '@agentroom/kit/grpc';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { createLogger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import { authProto, type AuthServiceClient } from '@agentroom/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Principal, TokenCache } from '../src/gateways/token-cache.js';
import { approveAsHuman, urls } from './support/services.js';

/**
 * Edge's token cache against two real auth processes sharing one Redis, as two auth replicas: the
 * cache follows revocations on replica A's stream while tokens are revoked on replica B. No timing
 * is asserted: every wait is for something to happen, bounded by the test's timeout.
 */
const AUTH_SCRIPT = fileURLToPath(new URL('../../auth/dist/main.js', import.meta.url));
const log = createLogger('edge', 'silent');

interface AuthReplica {
  address: string;
  http: string;
  stop(): Promise<void>;
}

let redis: LocalRedis;
let room: ServiceProcess;
let authEnv: Record<string, string>;

/** An auth process at a fixed gRPC port (so it can come back where it was), on the shared Redis. */
async function startAuth(grpcPort: number, httpPort: number): Promise<AuthReplica> {
  const address = `127.0.0.1:${grpcPort}`;
  const child: ChildProcess = spawn(process.execPath, [AUTH_SCRIPT], {
    env: { ...process.env, ...authEnv, AUTH_GRPC_ADDR: address, AUTH_HTTP_PORT: String(httpPort), AUTH_HTTP_HOST: '127.0.0.1' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = once(child, 'exit');
  const health = new HealthChecker(address);
  try {
    await eventually(async () => (await health.check()) === 'SERVING');
  } finally {
    health.close();
  }
  return {
    address,
    http: `http://127.0.0.1:${httpPort}`,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function eventually(check: () => boolean | Promise<boolean>): Promise<void> {
  const holds = async (): Promise<boolean> => {
    try {
      return await check();
    } catch {
      return false;
    }
  };
  while (!(await holds())) await new Promise((resolve) => setTimeout(resolve, 20));
}

let a: AuthReplica;
let b: AuthReplica;
let aPorts: [number, number];
/** A client of replica B: revocations are made there, and followed on A. */
let onB: ServiceClient<AuthServiceClient>;
let names = 0;

/** A token approved by a human on replica A's pages. */
async function token(): Promise<string> {
  const started = await onB.call('startDeviceFlow', { scopes: ['posts:write'], agentName: `cached-${(names += 1)}` });
  await approveAsHuman(a.http, started.userCode);
  const polled = await onB.call('pollDeviceFlow', { deviceCode: started.deviceCode });
  if (polled.status !== 'FLOW_STATUS_COMPLETED') throw new Error('the signup is still pending');
  return polled.accessToken;
}

function cacheOn(address: string, ttlMs: number, capacity?: number): { cache: TokenCache; close(): void } {
  const client = serviceClient(authProto().AuthService, address);
  const cache = new TokenCache(client, { ttlMs, log, ...(capacity === undefined ? {} : { capacity }) });
  cache.start();
  return {
    cache,
    close() {
      cache.close();
      client.close();
    },
  };
}

async function refusal(promise: Promise<Principal>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DomainError);
  return (error as DomainError).slug;
}

beforeAll(async () => {
  redis = await startRedisServer();
  const env = { SITE_URL: urls.siteUrl, LOG_LEVEL: 'silent', REDIS_URL: redis.url };
  room = await startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env });
  authEnv = { ...env, ROOM_ADDR: room.address, QUOTA_PER_ADDRESS: '100000', SHUTDOWN_GRACE_MS: '1000' };
  aPorts = [await freePort(), await freePort()];
  [a, b] = await Promise.all([startAuth(...aPorts), (async () => startAuth(await freePort(), await freePort()))()]);
  onB = serviceClient(authProto().AuthService, b.address);
}, 60_000);

afterAll(async () => {
  onB?.close();
  await a?.stop();
  await b?.stop();
  await room?.stop();
  await redis?.stop();
});

describe('the token cache', () => {
  it("keeps auth's answer, and drops it as soon as another auth replica revokes the token", async () => {
    const { cache, close } = cacheOn(a.address, 60_000);
    try {
      await eventually(() => cache.isLive);
      const t = await token();
      const first = await cache.authenticate(t);
      expect(first).toMatchObject({ agentName: `cached-${names}`, scopes: ['posts:write'] });
      // The same object: auth was not asked again (each of its answers is a new one).
      expect(await cache.authenticate(t)).toBe(first);
      expect(cache.size).toBe(1);
      await onB.call('revokeToken', { token: t });
      // The TTL is a minute: only the revocation stream can have dropped it.
      await eventually(() => cache.size === 0);
      expect(await refusal(cache.authenticate(t))).toBe('token-invalid');
    } finally {
      close();
    }
  });

  it('keeps no refused token, and nothing at all when TOKEN_CACHE_MS is 0', async () => {
    const live = cacheOn(a.address, 60_000);
    const off = cacheOn(a.address, 0);
    try {
      await eventually(() => live.cache.isLive);
      expect(await refusal(live.cache.authenticate(mintToken()))).toBe('token-invalid');
      expect(live.cache.size).toBe(0);
      const t = await token();
      const first = await off.cache.authenticate(t);
      expect(await off.cache.authenticate(t)).not.toBe(first);
      expect(await off.cache.authenticate(t)).toEqual(first);
      expect(off.cache.isLive).toBe(false);
      expect(off.cache.size).toBe(0);
    } finally {
      live.close();
      off.close();
    }
  });

  it('holds at most its capacity, the oldest answer leaving first', async () => {
    const { cache, close } = cacheOn(a.address, 60_000, 2);
    try {
      await eventually(() => cache.isLive);
      const [t1, t2, t3] = [await token(), await token(), await token()];
      const p1 = await cache.authenticate(t1);
      const p2 = await cache.authenticate(t2);
      const p3 = await cache.authenticate(t3);
      expect(cache.size).toBe(2);
      expect(await cache.authenticate(t3)).toBe(p3);
      expect(await cache.authenticate(t2)).toBe(p2);
      expect(await cache.authenticate(t1)).not.toBe(p1);
    } finally {
      close();
    }
  });

  it('empties and bypasses itself while its auth replica restarts, and is live again once a new stream is positioned', async () => {
    const { cache, close } = cacheOn(a.address, 60_000);
    try {
      await eventually(() => cache.isLive);
      const t = await token();
      const first = await cache.authenticate(t);
      expect(await cache.authenticate(t)).toBe(first);
      await a.stop();
      await eventually(() => !cache.isLive);
      expect(cache.size).toBe(0);
      // Bypassed: auth is asked, and replica A is not there to answer.
      expect(await refusal(cache.authenticate(t))).toBe('unavailable');
      // Revoked while this cache hears nothing: kept, it would answer for a minute more.
      await onB.call('revokeToken', { token: t });
      a = await startAuth(...aPorts);
      await eventually(() => cache.isLive);
      expect(await refusal(cache.authenticate(t))).toBe('token-invalid');
    } finally {
      close();
    }
  });
});
