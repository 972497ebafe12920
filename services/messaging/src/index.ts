import { grpcDependency } from '@agentroom/kit/grpc';
import { cursorSecretOrRandom } from '@agentroom/kit/http';
import { createLogger, type Logger } from '@agentroom/kit/log';
import type { Dependency } from '@agentroom/kit/process';
import { openRedis } from '@agentroom/kit/store';
import type { MessagingConfig } from './config.js';
import { Notifier, type NotifierOptions } from './notifier.js';
import { RoomGateway } from './room.gateway.js';
import { createMessagingGrpcServer } from './server.js';
import type { MessagingStore } from './store.js';
import { MemoryMessagingStore } from './store-memory.js';
import { RedisMessagingStore } from './store-redis.js';

export { messagingEnv, type MessagingConfig } from './config.js';
export { createMessagingGrpcServer, messagingHandlers, MESSAGING_SERVICE_NAME } from './server.js';
export { INBOX_MAX, type MessagingStore, type NewMessage, type Page, type PostNotified } from './store.js';
export { MemoryMessagingStore } from './store-memory.js';
export { RedisMessagingStore } from './store-redis.js';
export { checkMessageText, MESSAGE_TEXT_MAX, type MessageRecord, type Via } from './messages.js';
export {
  EVENTS_MAX,
  type EventRecord,
  FEED_MAX,
  NOTIFICATION_TYPES,
  type NotificationPage,
  type NotificationRecord,
  type NotificationType,
  type NotifiedMention,
  type NotifiedPost,
  type PostTarget,
  type ReadMarker,
} from './notifications.js';
export { Notifier, NOTIFIER_LEASE_MS, type NotifierOptions, type RoomPosts } from './notifier.js';

export interface RunningMessaging {
  /** The bound gRPC port (useful when the address asked for port 0). */
  port: number;
  store: MessagingStore;
  /** Follows the room's posts into notifications while this replica holds the lease. */
  notifier: Notifier;
  /** What `/readyz` checks: the store and the room service. */
  dependencies: Dependency[];
  /** NOT_SERVING from now on, while calls are still served: the first step of shutdown. */
  drain(): void;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** The notifier's lease and retry timings (tests shorten them). */
  notifier?: NotifierOptions;
}

/**
 * Starts the messaging service: storage, the room client, the gRPC server, then the notifier.
 * `main.ts` and the embedded launcher call this.
 */
export async function start(
  config: MessagingConfig,
  log: Logger = createLogger('messaging', config.LOG_LEVEL, config.LOG_FORMAT),
  options: StartOptions = {},
): Promise<RunningMessaging> {
  const redis =
    config.REDIS_URL === undefined
      ? undefined
      : await openRedis(config.REDIS_URL, 'messaging', log, { replicaWait: { replicas: config.REDIS_WAIT_REPLICAS, timeoutMs: config.REDIS_WAIT_TIMEOUT_MS } });
  const store: MessagingStore = redis ? new RedisMessagingStore(redis, config.REDIS_KEY_PREFIX) : new MemoryMessagingStore();
  const room = new RoomGateway(config.ROOM_ADDR, config.GRPC_DEADLINE_MS);
  const server = createMessagingGrpcServer({ store, room, log, cursorSecret: cursorSecretOrRandom(config.CURSOR_SECRET, log) });
  const port = await server.listen(config.MESSAGING_GRPC_ADDR);
  if (redis) server.monitor(() => store.ping());
  log.info({ port, storage: store.kind }, 'messaging service ready');
  // It waits for the room, and for the lease, on its own: neither holds the start up.
  const notifier = new Notifier(store, room, log, options.notifier);
  notifier.start();
  const roomHealth = grpcDependency('room', config.ROOM_ADDR);
  return {
    port,
    store,
    notifier,
    dependencies: [{ name: redis ? 'redis' : 'memory', check: () => store.ping() }, roomHealth],
    drain: () => server.beginDrain(),
    async stop() {
      // First, so another replica takes the lease over at once.
      await notifier.stop();
      roomHealth.close();
      await server.shutdown(config.SHUTDOWN_GRACE_MS);
      await store.close();
      room.close();
      await redis?.quit();
    },
  };
}
