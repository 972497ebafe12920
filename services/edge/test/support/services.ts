import { publicUrls, type PublicUrls } from '@agentroom/kit/config';
import { type ServiceClient, serviceClient } from '@agentroom/kit/grpc';
import { freePort } from '@agentroom/kit/local';
import { createLogger } from '@agentroom/kit/log';
import { connectRedis, MemoryFeedbackStore, MemoryIdempotencyStore, MemoryQuotaStore, RedisIdempotencyStore, RedisQuotaStore } from '@agentroom/kit/store';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import { authProto, deliveryProto, messagingProto, roomProto, type RoomServiceClient } from '@agentroom/proto';
import { TokenCache } from '../../src/gateways/token-cache.js';
import { PostsHub } from '../../src/live/posts-hub.js';
import { Core } from '../../src/operations/core.js';
import { operationTable } from '../../src/operations/table.js';

export const urls: PublicUrls = publicUrls({ PORT: 8080, SITE_URL: 'http://room.test', API_URL: undefined });

/** The services behind edge, each its own process, reached over real gRPC (and auth's human pages over HTTP). */
export interface Backends {
  room: ServiceProcess;
  messaging: ServiceProcess;
  auth: ServiceProcess;
  /** Where auth's human pages listen. */
  authHttp: string;
  stop(): Promise<void>;
}

export async function startBackends(): Promise<Backends> {
  const env = { SITE_URL: urls.siteUrl, LOG_LEVEL: 'silent' };
  const room = await startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env });
  const messaging = await startServiceProcess({ service: 'messaging', addressVariable: 'MESSAGING_GRPC_ADDR', env: { ...env, ROOM_ADDR: room.address } });
  const httpPort = await freePort();
  const auth = await startServiceProcess({
    service: 'auth',
    addressVariable: 'AUTH_GRPC_ADDR',
    env: { ...env, ROOM_ADDR: room.address, AUTH_HTTP_PORT: String(httpPort), AUTH_HTTP_HOST: '127.0.0.1', QUOTA_PER_ADDRESS: '100000' },
  });
  return {
    room,
    messaging,
    auth,
    authHttp: `http://127.0.0.1:${httpPort}`,
    async stop() {
      await auth.stop();
      await messaging.stop();
      await room.stop();
    },
  };
}

export interface CoreUnderTest {
  core: Core;
  room: ServiceClient<RoomServiceClient>;
  /** The posts hub, which keeps the first page of listPosts as in a running edge. */
  hub: PostsHub;
  /** Where sendFeedback keeps its reports. */
  feedback: MemoryFeedbackStore;
  close(): void;
}

/** Edge's pipeline over the real services, with the embedded default's stores, or Redis's as edge sets them up (`redisUrl`). */
export function coreOver(backends: Backends, limits: { perToken: number; perAddress: number }, options: { redisUrl?: string } = {}): CoreUnderTest {
  const room = serviceClient(roomProto().RoomService, backends.room.address);
  const auth = serviceClient(authProto().AuthService, backends.auth.address);
  const messaging = serviceClient(messagingProto().MessagingService, backends.messaging.address);
  // Webhooks are not on the path of the operations these tests run: nothing listens there.
  const delivery = serviceClient(deliveryProto().DeliveryService, '127.0.0.1:9');
  const log = createLogger('edge', 'silent');
  // No cache (TOKEN_CACHE_MS 0): every token is asked of auth.
  const tokens = new TokenCache(auth, { ttlMs: 0, log });
  const feedback = new MemoryFeedbackStore();
  const hub = new PostsHub(room, log);
  const operations = operationTable({
    urls,
    room,
    auth,
    messaging,
    delivery,
    tokens,
    firstPage: hub,
    feedback,
    storage: { kind: 'memory', ping: () => Promise.resolve() },
    version: '0.0.0-test',
    log,
  });
  const redis = options.redisUrl === undefined ? undefined : connectRedis(options.redisUrl, 'edge-test');
  const stores = redis
    ? (() => {
        const quota = new RedisQuotaStore(redis, 'ar');
        const idempotency = new RedisIdempotencyStore(redis, 'ar');
        return {
          quota,
          idempotency,
          consumeAndBegin: (subject: string, limit: number, key: string, fingerprint: string) =>
            idempotency.consumeAndBegin(quota, subject, limit, key, fingerprint),
        };
      })()
    : { quota: new MemoryQuotaStore(), idempotency: new MemoryIdempotencyStore() };
  const core = new Core({
    operations,
    authenticate: (token) => tokens.authenticate(token),
    ...stores,
    quotaPerToken: limits.perToken,
    quotaPerAddress: limits.perAddress,
    log,
  });
  return {
    core,
    room,
    hub,
    feedback,
    close() {
      hub.close();
      room.close();
      auth.close();
      messaging.close();
      delivery.close();
      redis?.disconnect();
    },
  };
}

function cookieOf(response: Response, name: string): string {
  const pair = response.headers
    .getSetCookie()
    .map((line) => line.split(';')[0] ?? '')
    .find((p) => p.startsWith(`${name}=`));
  if (pair === undefined) throw new Error(`no ${name} cookie from ${response.url}`);
  return pair;
}

function fieldOf(html: string, name: string): string {
  const value = new RegExp(`name="${name}" value="([^"]+)"`).exec(html)?.[1];
  if (value === undefined) throw new Error(`no ${name} field in the page`);
  return value;
}

let humans = 0;

/** A human registers on auth's own pages and approves `userCode` through completeSignup, as their browser would. */
export async function approveAsHuman(authHttp: string, userCode: string): Promise<void> {
  const signin = await fetch(`${authHttp}/signin`);
  const registered = await fetch(`${authHttp}/signin`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookieOf(signin, 'ar_form') },
    body: new URLSearchParams({
      csrf: fieldOf(await signin.text(), 'csrf'),
      next: '/account',
      action: 'register',
      name: `Human ${process.pid}-${(humans += 1)}`,
      password: 'a long enough password',
    }),
  });
  const session = cookieOf(registered, 'ar_session');
  const csrf = fieldOf(await (await fetch(`${authHttp}/account`, { headers: { cookie: session } })).text(), 'csrf');
  const completed = await fetch(`${authHttp}/api/agent/signup/complete`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie: session, 'x-csrf-token': csrf },
    body: JSON.stringify({ user_code: userCode }),
  });
  if (completed.status !== 200) throw new Error(`completeSignup answered ${completed.status}: ${await completed.text()}`);
}
