import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { publicUrls } from '@agentroom/kit/config';
import { grpcDependency, serviceClient } from '@agentroom/kit/grpc';
import { createLogger, type Logger } from '@agentroom/kit/log';
import { closeHttpServer, type Dependency, leaveKeepAlive } from '@agentroom/kit/process';
import {
  type Clock,
  MemoryIdempotencyStore,
  MemoryQuotaStore,
  openRedis,
  type QuotaStore,
  RedisIdempotencyStore,
  RedisQuotaStore,
  systemClock,
} from '@agentroom/kit/store';
import { toWebhook } from '@agentroom/api/wire';
import { deliveryProto, messagingProto, recordProto } from '@agentroom/proto';
import { AttemptLimiter } from './attempt-limiter.js';
import { Authorizations } from './authorization.js';
import { OAuthClients } from './clients.js';
import type { AuthConfig } from './config.js';
import { DeviceFlows } from './device-flow.js';
import type { AuthDomain } from './domain.js';
import { createAuthApp } from './http.js';
import { Humans } from './humans.js';
import { RoomGateway } from './room.gateway.js';
import { Safety } from './safety.js';
import { createAuthGrpcServer } from './server.js';
import type { AuthStore } from './store.js';
import { MemoryAuthStore } from './store-memory.js';
import { RedisAuthStore } from './store-redis.js';
import { Tokens } from './tokens.js';

export { authEnv, type AuthConfig } from './config.js';
export { AUTH_SERVICE_NAME, createAuthGrpcServer, authHandlers, isLoopbackPeer, type AuthHandlersOptions, type AuthGrpcServerOptions } from './server.js';
export {
  DeviceFlows,
  checkScopes,
  agentNameOf,
  AGENT_NAME_MAX,
  DEFAULT_AGENT_NAME,
  PROVISION_REASON_MAX,
  provisionReasonOf,
  type DeviceFlowsOptions,
  type FlowView,
  type PollResult,
  type ProvisionInput,
  type ProvisionedAgent,
  type StartedFlow,
  type StartFlowInput,
} from './device-flow.js';
export { Tokens, EXPIRED_TOKEN_RETENTION_MS, type Principal, type TokenGrantInput, type TokensOptions } from './tokens.js';
export {
  Humans,
  hashPassword,
  passwordMatches,
  DEFAULT_PASSWORD_HASH_COST,
  PASSWORD_HASH_COST_MIN,
  PASSWORD_HASH_COST_MAX,
  HUMAN_NAME_MAX,
  PASSWORD_MIN,
  SESSION_TTL_SECONDS,
  type HumansOptions,
  type OpenSession,
} from './humans.js';
export {
  Authorizations,
  AuthorizeRefusal,
  ACCESS_TOKEN_TTL_SECONDS,
  AUTHORIZATION_REQUEST_TTL_MS,
  CODE_TTL_MS,
  type AuthorizeParams,
  type ConsentChoice,
  type ConsentView,
  type IssuedTokens,
} from './authorization.js';
export {
  OAuthClients,
  checkClientMetadata,
  isDocumentClientId,
  redirectUriFault,
  redirectUriMatches,
  DOCUMENT_MAX_BYTES,
  DOCUMENT_TIMEOUT_MS,
  REGISTRATIONS_PER_HOUR,
  type ClientMetadataInput,
} from './clients.js';
export { AttemptLimiter, type AttemptClient, type AttemptLimiterOptions } from './attempt-limiter.js';
export { RoomGateway, type AgentUpsert } from './room.gateway.js';
export { Safety, type Acting, type RemoveInput, type SafetyOptions, type SuspendInput } from './safety.js';
export type { WebhookReader } from './web/routes.js';
export {
  nameKey,
  drainedLevel,
  REVOCATION_HEARTBEAT_MS,
  type AttemptWindow,
  type AuthStore,
  type Bucket,
  type Revocation,
  type RevocationFeedOptions,
  type RevocationWatcher,
  suspensionHolds,
} from './store.js';
export { MemoryAuthStore } from './store-memory.js';
export { RedisAuthStore } from './store-redis.js';
export type {
  AuthorizationCode,
  AuthorizationRequest,
  Connection,
  DeviceAnswer,
  DeviceFlow,
  DeviceFlowStatus,
  Grant,
  Human,
  OAuthClient,
  OAuthRecords,
  RefreshTokenRecord,
  Session,
  SuspensionRecord,
  TokenRecord,
} from './records.js';
export { formatUserCode, normalizeUserCode, newUserCode, USER_CODE_ALPHABET } from './user-code.js';

export type { AuthDomain } from './domain.js';

export interface RunningAuth extends AuthDomain {
  /** The gRPC port. */
  port: number;
  /** The human pages' request handler, for the embedded router to call in-process. */
  handler: RequestListener;
  /** Set when the pages listen on their own port. */
  httpPort?: number;
  store: AuthStore;
  /** What `/readyz` checks: the store and the room service. */
  dependencies: Dependency[];
  /**
   * The first step of shutdown, while everything is still served: gRPC health NOT_SERVING, and the
   * pages' answers close their connections, so balancers and proxies move to other replicas.
   */
  drain(): void;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Serve the pages on AUTH_HTTP_HOST:AUTH_HTTP_PORT (own process) rather than as a handler only (embedded). */
  listen?: boolean;
  log?: Logger;
  /** Time for every rule; tests pass their own. */
  clock?: Clock;
  /**
   * The per-address quota counters. The embedded launcher hands edge and auth the same store, so
   * memory mode counts one quota per address across both, as Redis does (docs/decisions.md §6).
   */
  quota?: QuotaStore;
}

/** Starts the auth service: storage, the room client, the gRPC server, and the human pages. */
export async function start(config: AuthConfig, options: StartOptions = {}): Promise<RunningAuth> {
  const log = options.log ?? createLogger('auth', config.LOG_LEVEL, config.LOG_FORMAT);
  const clock = options.clock ?? systemClock;
  const redis = config.REDIS_URL === undefined ? undefined : await openRedis(config.REDIS_URL, 'auth', log);
  const store: AuthStore = redis ? new RedisAuthStore(redis, config.REDIS_KEY_PREFIX, clock) : new MemoryAuthStore(clock);
  const urls = publicUrls(config);
  const room = new RoomGateway(config.ROOM_ADDR, config.GRPC_DEADLINE_MS);
  // Read for /account only: the pages answer without it (each agent's webhooks then say so), so it is no dependency of readiness.
  const delivery = serviceClient(deliveryProto().DeliveryService, config.DELIVERY_ADDR, { deadlineMs: config.GRPC_DEADLINE_MS });
  // Called by the account page and the moderation queue only: neither is a dependency of readiness.
  const messaging = serviceClient(messagingProto().MessagingService, config.MESSAGING_ADDR, { deadlineMs: config.GRPC_DEADLINE_MS });
  const record = serviceClient(recordProto().RecordService, config.RECORD_ADDR, { deadlineMs: config.GRPC_DEADLINE_MS });
  const tokens = new Tokens({ store, room, ttlDays: config.TOKEN_TTL_DAYS, rotationGraceSeconds: config.TOKEN_ROTATION_GRACE_SECONDS, clock, log });
  const safety = new Safety({ store, room, messaging, record, clock, log });
  const flows = new DeviceFlows({ store, tokens, room, clock, log, signinUrl: `${urls.siteUrl}/signin` });
  const humans = new Humans({ store, clock, passwordHashCost: config.PASSWORD_HASH_COST });
  const attempts = new AttemptLimiter({ store, clock });
  const clients = new OAuthClients({ store, clock, log, allowLoopbackDocuments: config.OAUTH_CIMD_ALLOW_LOOPBACK });
  if (config.OAUTH_CIMD_ALLOW_LOOPBACK)
    log.warn('OAUTH_CIMD_ALLOW_LOOPBACK is on: client metadata documents are fetched over http from loopback addresses too');
  const authorizations = new Authorizations({
    store,
    tokens,
    clients,
    room,
    clock,
    log,
    urls,
    accessTokenTtlSeconds: config.OAUTH_ACCESS_TOKEN_TTL_SECONDS,
    connectionTtlDays: config.TOKEN_TTL_DAYS,
  });
  await grantModerators(humans, config.AUTH_MODERATORS, log);
  const server = createAuthGrpcServer({ flows, tokens, humans, clients, authorizations, safety, log });
  const port = await server.listen(config.AUTH_GRPC_ADDR);
  if (redis) server.monitor(() => store.ping());
  const app = createAuthApp({
    domain: { flows, tokens, humans, attempts, clients, authorizations, safety, messaging, record },
    urls,
    log,
    quota: options.quota ?? (redis ? new RedisQuotaStore(redis, config.REDIS_KEY_PREFIX, clock) : new MemoryQuotaStore(clock)),
    idempotency: redis ? new RedisIdempotencyStore(redis, config.REDIS_KEY_PREFIX) : new MemoryIdempotencyStore(),
    quotaPerAddress: config.QUOTA_PER_ADDRESS,
    trustProxy: config.TRUST_PROXY,
    selfRegistration: config.AUTH_SELF_REGISTRATION,
    // A read, so sent again to another replica when the first goes away (docs/decisions.md §23).
    webhooks: { webhooksOf: async (agentId) => (await delivery.call('listWebhooks', { agentId })).webhooks.map(toWebhook) },
    room,
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
  const roomHealth = grpcDependency('room', config.ROOM_ADDR);
  return {
    port,
    handler: app,
    ...(httpPort === undefined ? {} : { httpPort }),
    store,
    flows,
    tokens,
    humans,
    attempts,
    clients,
    authorizations,
    safety,
    messaging,
    record,
    dependencies: [{ name: redis ? 'redis' : 'memory', check: () => store.ping() }, roomHealth],
    drain() {
      server.beginDrain();
      if (http) leaveKeepAlive(http);
    },
    async stop() {
      roomHealth.close();
      if (http) await closeHttpServer(http, config.SHUTDOWN_GRACE_MS);
      await server.shutdown(config.SHUTDOWN_GRACE_MS);
      room.close();
      delivery.close();
      messaging.close();
      record.close();
      await redis?.quit();
    },
  };
}

/**
 * The chart's `auth.moderators` (AUTH_MODERATORS), applied at each start: those humans are made
 * moderators; a name no human has yet is logged and skipped (the next start grants it once they
 * have signed up). Moderators not named keep the role: the operator command takes it.
 */
export async function grantModerators(humans: Humans, names: readonly string[], log: Logger): Promise<void> {
  for (const name of names) {
    const granted = await humans.setModerator(name, true);
    if (granted === undefined) log.warn({ humanName: name }, 'AUTH_MODERATORS names no human yet: not granted');
    else log.info({ humanId: granted.id }, 'moderator granted by AUTH_MODERATORS');
  }
}
