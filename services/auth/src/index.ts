import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeHttpServer, createLogger, type Logger, MemoryIdempotencyStore, MemoryQuotaStore, openRedis, publicUrls, RedisIdempotencyStore, RedisQuotaStore } from '@agentroom/kit';
import type { AuthConfig } from './config.js';
import { DeviceFlows } from './device-flows.js';
import { createAuthApp } from './http.js';
import { AttemptLimiter, Humans } from './humans.js';
import { RoomGateway } from './room.gateway.js';
import { createAuthGrpcServer } from './server.js';
import type { AuthStore } from './store.js';
import { MemoryAuthStore } from './store-memory.js';
import { RedisAuthStore } from './store-redis.js';
import { Tokens } from './tokens.js';

export { authEnv, type AuthConfig } from './config.js';
export { AUTH_SERVICE_NAME, createAuthGrpcServer, authHandlers } from './server.js';
export { DeviceFlows, checkScopes, EXPIRES_IN_SECONDS, INTERVAL_SECONDS, type FlowView, type PollResult, type StartedFlow } from './device-flows.js';
export { Tokens, type Principal } from './tokens.js';
export { Humans, AttemptLimiter, hashPassword, passwordMatches } from './humans.js';
export { RoomGateway } from './room.gateway.js';
export type { AuthStore } from './store.js';
export { MemoryAuthStore } from './store-memory.js';
export { RedisAuthStore } from './store-redis.js';
export type { DeviceFlow, Grant, Human, Session, TokenRecord } from './records.js';
export { formatUserCode, normalizeUserCode, newUserCode, USER_CODE_ALPHABET } from './user-code.js';

/** The domain of a running auth service, for its pages (and tests) to call in-process. */
export interface AuthDomain {
  flows: DeviceFlows;
  tokens: Tokens;
  humans: Humans;
  attempts: AttemptLimiter;
}

export interface RunningAuth extends AuthDomain {
  /** The gRPC port. */
  port: number;
  /** The human pages' request handler, for the embedded router to call in-process. */
  handler: RequestListener;
  /** Set when the pages listen on their own port. */
  httpPort?: number;
  store: AuthStore;
  stop(): Promise<void>;
}

/**
 * Starts the auth service: storage, the room client, the gRPC server, and the human pages, on
 * AUTH_HTTP_HOST:AUTH_HTTP_PORT with `listen` (cluster, Kubernetes) or as a handler only (embedded).
 */
export async function start(config: AuthConfig, options: { listen: boolean; log?: Logger } = { listen: false }): Promise<RunningAuth> {
  const log = options.log ?? createLogger('auth', config.LOG_LEVEL);
  const redis = config.REDIS_URL === undefined ? undefined : await openRedis(config.REDIS_URL, 'auth', log);
  const store: AuthStore = redis ? new RedisAuthStore(redis, config.REDIS_KEY_PREFIX) : new MemoryAuthStore();
  const urls = publicUrls(config);
  const now = Date.now;
  const room = new RoomGateway(config.ROOM_ADDR, config.GRPC_DEADLINE_MS);
  const tokens = new Tokens(store, urls, config.TOKEN_TTL_DAYS, now);
  const flows = new DeviceFlows(store, tokens, room, urls, now);
  const humans = new Humans(store, now);
  const attempts = new AttemptLimiter(store, now);
  const server = createAuthGrpcServer({ flows, tokens, log });
  const port = await server.listen(config.AUTH_GRPC_ADDR);
  if (redis) server.monitor(() => store.ping());
  const app = createAuthApp({
    domain: { flows, tokens, humans, attempts },
    urls,
    log,
    quota: redis ? new RedisQuotaStore(redis, config.REDIS_KEY_PREFIX) : new MemoryQuotaStore(),
    idempotency: redis ? new RedisIdempotencyStore(redis, config.REDIS_KEY_PREFIX) : new MemoryIdempotencyStore(),
    quotaPerAddress: config.QUOTA_PER_ADDRESS,
    trustProxy: config.TRUST_PROXY,
    selfRegistration: config.AUTH_SELF_REGISTRATION,
  });
  let http: Server | undefined;
  let httpPort: number | undefined;
  if (options.listen) {
    http = createServer(app);
    await new Promise<void>((resolve, reject) => {
      http?.once('error', reject);
      http?.listen(config.AUTH_HTTP_PORT, config.AUTH_HTTP_HOST, () => resolve());
    });
    httpPort = (http.address() as AddressInfo).port;
  }
  log.info({ port, httpPort, storage: store.kind }, 'auth service ready');
  return {
    port,
    handler: app,
    ...(httpPort === undefined ? {} : { httpPort }),
    store,
    flows,
    tokens,
    humans,
    attempts,
    async stop() {
      if (http) await closeHttpServer(http, config.SHUTDOWN_GRACE_MS);
      await server.shutdown(config.SHUTDOWN_GRACE_MS);
      room.close();
      await redis?.quit();
    },
  };
}
