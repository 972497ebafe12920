import { cursorSecretOrRandom } from '@agentroom/kit/http';
import { createLogger, type Logger } from '@agentroom/kit/log';
import type { Dependency } from '@agentroom/kit/process';
import { openRedis, type RedisClient, systemClock } from '@agentroom/kit/store';
import type { RoomConfig } from './config.js';
import { createRoomGrpcServer } from './server.js';
import type { RoomStore, RoomStoreOptions } from './store.js';
import { MemoryRoomStore } from './store-memory.js';
import { RedisRoomStore } from './store-redis.js';

export { roomEnv, type RoomConfig } from './config.js';
export { createRoomGrpcServer, roomHandlers, ROOM_SERVICE_NAME } from './server.js';
export type { RoomStore, RoomStoreOptions, NewPost, Page, Appended } from './store.js';
export { MemoryRoomStore } from './store-memory.js';
export { RedisRoomStore } from './store-redis.js';
export { checkPostText, MENTIONS_MAX, POST_TEXT_MAX, type MentionRecord, type PostRecord, type Via } from './posts.js';
export type { AgentRecord } from './agents.js';

export interface RunningRoom {
  /** The bound gRPC port (useful when the address asked for port 0). */
  port: number;
  store: RoomStore;
  /** What `/readyz` checks: the store. */
  dependencies: Dependency[];
  /** NOT_SERVING from now on, while calls are still served: the first step of shutdown. */
  drain(): void;
  stop(): Promise<void>;
}

/** The room in Redis, once the agents kept before the name index existed have their names indexed (once per keyspace). */
async function redisStore(redis: RedisClient, prefix: string, log: Logger, options: RoomStoreOptions): Promise<RedisRoomStore> {
  const store = new RedisRoomStore(redis, prefix, options);
  const indexed = await store.indexExistingAgentNames();
  if (indexed > 0) log.info({ agents: indexed }, 'indexed the names of the agents kept before mentions existed');
  return store;
}

/** Starts the room service: storage, then the gRPC server. `main.ts` and the embedded launcher call this. */
export async function start(config: RoomConfig, log: Logger = createLogger('room', config.LOG_LEVEL, config.LOG_FORMAT)): Promise<RunningRoom> {
  const redis =
    config.REDIS_URL === undefined
      ? undefined
      : await openRedis(config.REDIS_URL, 'room', log, { replicaWait: { replicas: config.REDIS_WAIT_REPLICAS, timeoutMs: config.REDIS_WAIT_TIMEOUT_MS } });
  const options: RoomStoreOptions = { postsRetention: config.POSTS_RETENTION };
  const store: RoomStore = redis ? await redisStore(redis, config.REDIS_KEY_PREFIX, log, options) : new MemoryRoomStore(systemClock, options);
  const server = createRoomGrpcServer({ store, log, cursorSecret: cursorSecretOrRandom(config.CURSOR_SECRET, log) });
  const port = await server.listen(config.ROOM_GRPC_ADDR);
  if (redis) server.monitor(() => store.ping());
  log.info({ port, storage: store.kind }, 'room service ready');
  return {
    port,
    store,
    dependencies: [{ name: redis ? 'redis' : 'memory', check: () => store.ping() }],
    drain: () => server.beginDrain(),
    async stop() {
      await server.shutdown(config.SHUTDOWN_GRACE_MS);
      await store.close();
      await redis?.quit();
    },
  };
}
