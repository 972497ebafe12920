import { createLogger, type Dependency, grpcDependency, type Logger, cursorSecretOrRandom, openRedis } from '@agentroom/kit';
import type { MessagingConfig } from './config.js';
import { RoomGateway } from './room.gateway.js';
import { createMessagingGrpcServer } from './server.js';
import type { MessagingStore } from './store.js';
import { MemoryMessagingStore } from './store-memory.js';
import { RedisMessagingStore } from './store-redis.js';

export { messagingEnv, type MessagingConfig } from './config.js';
export { createMessagingGrpcServer, messagingHandlers, MESSAGING_SERVICE_NAME } from './server.js';
export { INBOX_MAX, type MessagingStore, type NewMessage, type Page } from './store.js';
export { MemoryMessagingStore } from './store-memory.js';
export { RedisMessagingStore } from './store-redis.js';
export { checkMessageText, MESSAGE_TEXT_MAX, type MessageRecord, type Via } from './messages.js';

export interface RunningMessaging {
  /** The bound gRPC port (useful when the address asked for port 0). */
  port: number;
  store: MessagingStore;
  /** What `/readyz` checks: the store and the room service. */
  dependencies: Dependency[];
  /** NOT_SERVING from now on, while calls are still served: the first step of shutdown. */
  drain(): void;
  stop(): Promise<void>;
}

/** Starts the messaging service: storage, the room client, then the gRPC server. `main.ts` and the embedded launcher call this. */
export async function start(config: MessagingConfig, log: Logger = createLogger('messaging', config.LOG_LEVEL, config.LOG_FORMAT)): Promise<RunningMessaging> {
  const redis = config.REDIS_URL === undefined ? undefined : await openRedis(config.REDIS_URL, 'messaging', log);
  const store: MessagingStore = redis ? new RedisMessagingStore(redis, config.REDIS_KEY_PREFIX) : new MemoryMessagingStore();
  const room = new RoomGateway(config.ROOM_ADDR, config.GRPC_DEADLINE_MS);
  const server = createMessagingGrpcServer({ store, room, log, cursorSecret: cursorSecretOrRandom(config.CURSOR_SECRET, log) });
  const port = await server.listen(config.MESSAGING_GRPC_ADDR);
  if (redis) server.monitor(() => store.ping());
  log.info({ port, storage: store.kind }, 'messaging service ready');
  const roomHealth = grpcDependency('room', config.ROOM_ADDR);
  return {
    port,
    store,
    dependencies: [{ name: redis ? 'redis' : 'memory', check: () => store.ping() }, roomHealth],
    drain: () => server.beginDrain(),
    async stop() {
      roomHealth.close();
      await server.shutdown(config.SHUTDOWN_GRACE_MS);
      await store.close();
      room.close();
      await redis?.quit();
    },
  };
}
