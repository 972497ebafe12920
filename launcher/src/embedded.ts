import { loadConfig, publicUrls, type PublicUrls } from '@agentroom/kit/config';
import { newCursorSecret } from '@agentroom/kit/http';
import { createLogger, type DestinationStream, type Logger, type LogFormat } from '@agentroom/kit/log';
import { closeHttpServer, Probes } from '@agentroom/kit/process';
import { type Clock, MemoryQuotaStore, systemClock } from '@agentroom/kit/store';
import { edgeEnv, start as startEdge } from '@agentroom/edge';
import { roomEnv, start as startRoom } from '@agentroom/room';
import { deliveryEnv, start as startDelivery } from '@agentroom/delivery';
import { messagingEnv, start as startMessaging } from '@agentroom/messaging';
import { openDatabase, recordEnv } from '@agentroom/record';
import { authEnv, type AuthDomain, start as startAuth } from '@agentroom/auth';
import { embeddedEnv } from './config.js';
import { startRecordThread } from './record-thread.js';
import { discoveryDocuments, resolveRoutes, startRouter } from '@agentroom/gateway';

export interface Embedded {
  port: number;
  urls: PublicUrls;
  storage: 'redis' | 'memory';
  /** The room's gRPC port on loopback. */
  roomPort: number;
  /** The record's gRPC port on loopback (every post, and search). */
  recordPort: number;
  /** Where the record keeps every post: PGlite in memory or in DATA_DIR, or the PostgreSQL at DATABASE_URL. */
  record: 'memory' | 'folder' | 'postgres';
  /** The messaging service's gRPC port on loopback. */
  messagingPort: number;
  authPort: number;
  /** The auth service's domain, as its pages use it (tests approve flows through it). */
  auth: AuthDomain;
  /** `/livez` and `/readyz` of the whole process: its store and the services' gRPC health. */
  probes: Probes;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Time for auth's rules (poll interval, flow expiry, sessions) and the quota day; tests pass their own instead of sleeping. */
  clock?: Clock;
  /** Where the services log, in place of LOG_FORMAT (`npm start` holds their start-up lines back in a terminal). */
  output?: LogFormat | DestinationStream;
}

/**
 * The whole product in one process: each service started by its own `start(config)`, talking
 * gRPC over loopback, edge behind the router on PORT. Memory storage unless REDIS_URL is set.
 */
export async function startEmbedded(env: NodeJS.ProcessEnv = process.env, log?: Logger, options: EmbeddedOptions = {}): Promise<Embedded> {
  const config = loadConfig(embeddedEnv, env);
  const clock = options.clock ?? systemClock;
  const output = options.output ?? config.LOG_FORMAT;
  // In memory, edge and auth share one quota store: one count per address across the API and the
  // auth pages, as in Redis, where both count under the same keys (docs/decisions.md §6).
  const quota = config.REDIS_URL === undefined ? new MemoryQuotaStore(clock) : undefined;
  const logger = log ?? createLogger('gateway', config.LOG_LEVEL, output);
  // One cursor secret for the services that sign cursors: CURSOR_SECRET, or one drawn for this start (docs/decisions.md §6).
  const CURSOR_SECRET = config.CURSOR_SECRET ?? newCursorSecret();
  // A PostgreSQL that does not answer (or is too old) is told in one line before any service starts and logs.
  if (config.DATABASE_URL !== undefined) await (await openDatabase({ url: config.DATABASE_URL })).close();
  const room = await startRoom(loadConfig(roomEnv, { ...env, ROOM_GRPC_ADDR: '127.0.0.1:0', CURSOR_SECRET }), createLogger('room', config.LOG_LEVEL, output));
  // The record follows the room from where it left off: with DATA_DIR its posts, lease and position
  // outlive a restart, and a room that starts empty again is followed from that position on.
  // In a thread of its own: PGlite's WASM and the archiving stay off the event loop that serves
  // every request, and its start runs beside the other services' (docs/decisions.md §39).
  const recording = startRecordThread(
    loadConfig(recordEnv, { ...env, RECORD_GRPC_ADDR: '127.0.0.1:0', ROOM_ADDR: `127.0.0.1:${room.port}`, CURSOR_SECRET }),
    output,
    logger,
  );
  // Awaited before edge starts; a failure meanwhile is not an unhandled rejection.
  recording.catch(() => undefined);
  const messaging = await startMessaging(
    loadConfig(messagingEnv, { ...env, MESSAGING_GRPC_ADDR: '127.0.0.1:0', ROOM_ADDR: `127.0.0.1:${room.port}`, CURSOR_SECRET }),
    createLogger('messaging', config.LOG_LEVEL, output),
  );
  const delivery = await startDelivery(
    loadConfig(deliveryEnv, { ...env, DELIVERY_GRPC_ADDR: '127.0.0.1:0', MESSAGING_ADDR: `127.0.0.1:${messaging.port}`, ROOM_ADDR: `127.0.0.1:${room.port}` }),
    createLogger('delivery', config.LOG_LEVEL, output),
  );
  // Auth removes posts through the record too (docs/decisions.md §40): it starts once the record answers.
  const record = await recording;
  const auth = await startAuth(
    loadConfig(authEnv, {
      ...env,
      AUTH_GRPC_ADDR: '127.0.0.1:0',
      ROOM_ADDR: `127.0.0.1:${room.port}`,
      DELIVERY_ADDR: `127.0.0.1:${delivery.port}`,
      MESSAGING_ADDR: `127.0.0.1:${messaging.port}`,
      RECORD_ADDR: `127.0.0.1:${record.port}`,
    }),
    {
      listen: false,
      log: createLogger('auth', config.LOG_LEVEL, output),
      clock,
      ...(quota ? { quota } : {}),
    },
  );
  const edgeConfig = loadConfig(edgeEnv, {
    ...env,
    ROOM_ADDR: `127.0.0.1:${room.port}`,
    AUTH_ADDR: `127.0.0.1:${auth.port}`,
    MESSAGING_ADDR: `127.0.0.1:${messaging.port}`,
    DELIVERY_ADDR: `127.0.0.1:${delivery.port}`,
    RECORD_ADDR: `127.0.0.1:${record.port}`,
  });
  const edge = await startEdge(edgeConfig, {
    listen: false,
    log: createLogger('edge', config.LOG_LEVEL, output),
    ...(quota ? { quota } : {}),
  });
  const urls = publicUrls(config);
  const router = await startRouter({
    routes: resolveRoutes(urls),
    targets: { edge: { kind: 'local', handler: edge.handler }, auth: { kind: 'local', handler: auth.handler } },
    documents: discoveryDocuments(urls),
    // The router's own answers show the anonymous daily allowance, whole (docs/decisions.md §6).
    quotaLimit: edgeConfig.QUOTA_PER_ADDRESS,
    headersTimeoutMs: config.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: config.REQUEST_TIMEOUT_MS,
    port: config.PORT,
    log: logger,
  });
  // Each service's store is the same one in-process; the edge's peers are the real gRPC servers.
  const probes = new Probes([room.dependencies[0], ...edge.dependencies].filter((dependency) => dependency !== undefined));
  return {
    port: router.port,
    probes,
    urls,
    storage: room.store.kind,
    roomPort: room.port,
    recordPort: record.port,
    record: record.storage === 'postgres' ? 'postgres' : config.DATA_DIR === undefined ? 'memory' : 'folder',
    messagingPort: messaging.port,
    authPort: auth.port,
    auth,
    async stop() {
      probes.drain();
      // Live streams never finish by themselves: end them first, or the router would wait out its grace.
      edge.endLiveStreams();
      await closeHttpServer(router.server, config.SHUTDOWN_GRACE_MS);
      await edge.stop();
      await auth.stop();
      await delivery.stop();
      await messaging.stop();
      // Before the room: what it archived is stored as its position, and its database closed cleanly.
      await record.stop();
      await room.stop();
    },
  };
}
