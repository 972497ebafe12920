import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { publicUrls } from '@agentroom/kit/config';
import { grpcDependency, serviceClient } from '@agentroom/kit/grpc';
import { createLogger, type Logger } from '@agentroom/kit/log';
import { closeHttpServer, type Dependency, leaveKeepAlive } from '@agentroom/kit/process';
import {
  MemoryFeedbackStore,
  MemoryIdempotencyStore,
  MemoryQuotaStore,
  openRedis,
  type QuotaStore,
  RedisFeedbackStore,
  RedisIdempotencyStore,
  RedisQuotaStore,
} from '@agentroom/kit/store';
import { authProto, deliveryProto, messagingProto, recordProto, roomProto } from '@agentroom/proto';
import type { EdgeConfig } from './config.js';
import { TokenCache } from './gateways/token-cache.js';
import { createEdgeApp } from './server.js';
import { Core } from './operations/core.js';
import { operationTable } from './operations/table.js';
import { PostsHub } from './live/posts-hub.js';
import { messagingFeeds } from './live/routes.js';
import { LiveStreams } from './live/sse.js';
import { McpChanges } from './mcp/changes.js';
import { LegacySessions, MemorySessionStore, RedisSessionStore } from './mcp/sessions.js';

export { edgeEnv, type EdgeConfig } from './config.js';
export { createEdgeApp } from './server.js';
export { TokenCache, TOKEN_CACHE_CAPACITY, REVOCATION_SILENCE_MS, type Principal, type TokenCacheOptions } from './gateways/token-cache.js';
export { Core, type Admission, type Outcome } from './operations/core.js';
export { operationTable, type OperationName, type Operations } from './operations/table.js';
export { MCP_TOOLS } from './mcp/tools.js';
export { REST_BINDINGS } from '@agentroom/api';
export type * from '@agentroom/api';

const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

export interface RunningEdge {
  /** The request handler, for the embedded router to call in-process. */
  handler: RequestListener;
  /** Set when edge listens on its own port. */
  server?: Server;
  port?: number;
  /** What `/readyz` checks: the store (with Redis) and the room, auth and messaging services. */
  dependencies: Dependency[];
  /**
   * The first step of shutdown, while requests are still served: answers close their connections,
   * so proxies in front open the next one to another replica. Live streams end in `stop`.
   */
  drain(): void;
  /** Ends every open event stream, telling its client to reconnect (with Last-Event-ID) elsewhere. */
  endLiveStreams(): void;
  stop(): Promise<void>;
}

export interface EdgeStartOptions {
  listen: boolean;
  log?: Logger;
  /**
   * The quota counters. The embedded launcher hands edge and auth the same store, so memory mode
   * counts one quota per address across the API and the auth pages, as Redis does (docs/decisions.md §6).
   */
  quota?: QuotaStore;
}

/**
 * Starts edge. With `listen`, it serves HTTP on EDGE_HOST:EDGE_PORT (cluster, Kubernetes);
 * without, it only answers the handler for the embedded router.
 */
export async function start(config: EdgeConfig, options: EdgeStartOptions): Promise<RunningEdge> {
  const log = options.log ?? createLogger('edge', config.LOG_LEVEL, config.LOG_FORMAT);
  const redis = config.REDIS_URL === undefined ? undefined : await openRedis(config.REDIS_URL, 'edge', log);
  // The services behind edge, each through kit's client typed from its proto (docs/decisions.md §29).
  const deadline = { deadlineMs: config.GRPC_DEADLINE_MS };
  const room = serviceClient(roomProto().RoomService, config.ROOM_ADDR, deadline);
  const auth = serviceClient(authProto().AuthService, config.AUTH_ADDR, deadline);
  // Who a bearer token speaks for, kept TOKEN_CACHE_MS while auth's revocation stream is live.
  const tokens = new TokenCache(auth, { ttlMs: config.TOKEN_CACHE_MS, log });
  tokens.start();
  const messaging = serviceClient(messagingProto().MessagingService, config.MESSAGING_ADDR, deadline);
  const delivery = serviceClient(deliveryProto().DeliveryService, config.DELIVERY_ADDR, deadline);
  // Not a dependency of readiness: while it is down, only search and the posts past the room's window wait (docs/decisions.md §35).
  const record = serviceClient(recordProto().RecordService, config.RECORD_ADDR, deadline);
  const hub = new PostsHub(room, log, undefined, config.POSTS_RETENTION);
  const live = new LiveStreams({ heartbeatMs: config.LIVE_HEARTBEAT_MS, maxBufferedBytes: config.LIVE_MAX_BUFFERED_BYTES }, log);
  const feeds = messagingFeeds(messaging);
  // MCP's change notifications hear the same hub and feeds; a 2025 session lives in the shared store (docs/decisions.md §47).
  const changes = new McpChanges({ hub, watchNotifications: feeds.watchNotifications, log });
  const sessionStore = redis ? new RedisSessionStore(redis, config.REDIS_KEY_PREFIX) : new MemorySessionStore();
  const sessions = new LegacySessions(sessionStore, changes, log);
  const endLiveStreams = (): void => {
    live.closeAll();
    void sessions.close();
    changes.close();
    hub.close();
  };
  const urls = publicUrls(config);
  const operations = operationTable({
    urls,
    room,
    auth,
    messaging,
    delivery,
    record,
    tokens,
    firstPage: hub,
    feedback: redis ? new RedisFeedbackStore(redis, config.REDIS_KEY_PREFIX) : new MemoryFeedbackStore(),
    storage: redis ? { kind: 'redis', ping: async () => void (await redis.ping()) } : { kind: 'memory', ping: () => Promise.resolve() },
    version,
    log,
  });
  const quota = options.quota ?? (redis ? new RedisQuotaStore(redis, config.REDIS_KEY_PREFIX) : new MemoryQuotaStore());
  const idempotency = redis ? new RedisIdempotencyStore(redis, config.REDIS_KEY_PREFIX) : new MemoryIdempotencyStore();
  const core = new Core({
    operations,
    authenticate: (token) => tokens.authenticate(token),
    quota,
    idempotency,
    // On Redis a write's quota count and idempotency claim are one script, one round trip.
    ...(quota instanceof RedisQuotaStore && idempotency instanceof RedisIdempotencyStore
      ? {
          consumeAndBegin: (subject: string, limit: number, key: string, fingerprint: string) =>
            idempotency.consumeAndBegin(quota, subject, limit, key, fingerprint),
        }
      : {}),
    quotaPerAddress: config.QUOTA_PER_ADDRESS,
    quotaPerToken: config.QUOTA_PER_TOKEN,
    log,
  });
  const app = createEdgeApp({
    urls,
    log,
    core,
    room,
    auth,
    trustProxy: config.TRUST_PROXY,
    version,
    mcpAllowedOrigins: config.MCP_ALLOWED_ORIGINS,
    live: {
      hub,
      live,
      ...feeds,
    },
    mcpChanges: { changes, sessions },
  });
  let server: Server | undefined;
  let port: number | undefined;
  if (options.listen) {
    server = createServer(app);
    await new Promise<void>((resolve, reject) => {
      server?.once('error', reject);
      server?.listen(config.EDGE_PORT, config.EDGE_HOST, () => resolve());
    });
    port = (server.address() as AddressInfo).port;
    log.info({ port }, 'edge listening');
  }
  const peers = [grpcDependency('room', config.ROOM_ADDR), grpcDependency('auth', config.AUTH_ADDR), grpcDependency('messaging', config.MESSAGING_ADDR)];
  return {
    handler: app,
    ...(server ? { server } : {}),
    ...(port === undefined ? {} : { port }),
    dependencies: [...(redis ? [{ name: 'redis', check: async () => void (await redis.ping()) }] : []), ...peers],
    drain() {
      if (server) leaveKeepAlive(server);
    },
    endLiveStreams,
    async stop() {
      // Open event streams never end by themselves: they are told to reconnect (to another replica).
      endLiveStreams();
      for (const peer of peers) peer.close();
      if (server) await closeHttpServer(server, config.SHUTDOWN_GRACE_MS);
      room.close();
      tokens.close();
      auth.close();
      messaging.close();
      delivery.close();
      record.close();
      await sessionStore.close();
      await redis?.quit();
    },
  };
}
