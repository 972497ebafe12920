import { createLogger, type Logger, openRedis, publicUrls } from '@agentroom/kit';
import type { AuthConfig } from './config.js';
import { DeviceFlows } from './device-flows.js';
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
  port: number;
  store: AuthStore;
  stop(): Promise<void>;
}

/** Starts the auth service: storage, the room client, the gRPC server. */
export async function start(config: AuthConfig, log: Logger = createLogger('auth', config.LOG_LEVEL)): Promise<RunningAuth> {
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
  log.info({ port, storage: store.kind }, 'auth service ready');
  return {
    port,
    store,
    flows,
    tokens,
    humans,
    attempts,
    async stop() {
      await server.shutdown(config.SHUTDOWN_GRACE_MS);
      room.close();
      await redis?.quit();
    },
  };
}
