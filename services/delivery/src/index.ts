import { grpcDependency, serviceClient } from '@agentroom/kit/grpc';
import type { OutboundPolicy, ResolvedAddress } from '@agentroom/kit/http';
import { createLogger, type Logger } from '@agentroom/kit/log';
import type { Dependency } from '@agentroom/kit/process';
import { openRedis } from '@agentroom/kit/store';
import { messagingProto, roomProto } from '@agentroom/proto';
import type { DeliveryConfig } from './config.js';
import { Dispatcher, type DispatcherOptions } from './dispatcher.js';
import { roomRemovals } from './removals.js';
import { createDeliveryGrpcServer } from './server.js';
import type { DeliveryStore } from './store.js';
import { MemoryDeliveryStore } from './store-memory.js';
import { RedisDeliveryStore } from './store-redis.js';
import { DeliveryWorker, type WorkerOptions } from './worker.js';

export { deliveryEnv, type DeliveryConfig } from './config.js';
export { createDeliveryGrpcServer, deliveryHandlers, DELIVERY_SERVICE_NAME } from './server.js';
export type { AttemptOutcome, DeliveryStore, QueuedJob } from './store.js';
export { MemoryDeliveryStore } from './store-memory.js';
export { RedisDeliveryStore } from './store-redis.js';
export { Dispatcher, type DispatcherOptions } from './dispatcher.js';
export { CLAIM_IDLE_MS, DeliveryWorker, USER_AGENT, type WorkerOptions } from './worker.js';
export * from './webhooks.js';

export interface RunningDelivery {
  /** The bound gRPC port (useful when the address asked for port 0). */
  port: number;
  store: DeliveryStore;
  /** Follows messaging's events into the queue while this replica holds the lease. */
  dispatcher: Dispatcher;
  /** Attempts the queued deliveries (every replica runs one). */
  worker: DeliveryWorker;
  /** What `/readyz` checks: the store and the messaging service. */
  dependencies: Dependency[];
  /** NOT_SERVING from now on, while calls are still served: the first step of shutdown. */
  drain(): void;
  stop(): Promise<void>;
  /** Stops at once as a killed process would: connections dropped, nothing acked, the lease kept until it lapses (tests). */
  crash(): Promise<void>;
}

export interface StartOptions {
  /** The dispatcher's lease and retry timings (tests shorten them). */
  dispatcher?: DispatcherOptions;
  /** The worker's timings (tests shorten them); its outbound policy comes from the configuration. */
  worker?: Omit<WorkerOptions, 'policy' | 'lookup'>;
  /** DNS resolution of endpoints' hosts, at creation and at each attempt (tests). */
  lookup?: (hostname: string) => Promise<ResolvedAddress[]>;
}

/**
 * Starts the delivery service: storage, the gRPC server, then the dispatcher (messaging's events
 * into the queue) and the worker (the queue's attempts). `main.ts` and the embedded launcher call this.
 */
export async function start(
  config: DeliveryConfig,
  log: Logger = createLogger('delivery', config.LOG_LEVEL, config.LOG_FORMAT),
  options: StartOptions = {},
): Promise<RunningDelivery> {
  const redis = config.REDIS_URL === undefined ? undefined : await openRedis(config.REDIS_URL, 'delivery', log);
  const store: DeliveryStore = redis ? new RedisDeliveryStore(redis, config.REDIS_KEY_PREFIX) : new MemoryDeliveryStore();
  const policy: OutboundPolicy = config.WEBHOOKS_ALLOW_PRIVATE_TARGETS ? { allowPrivate: true, allowHttp: true } : {};
  if (config.WEBHOOKS_ALLOW_PRIVATE_TARGETS) {
    log.warn(
      'WEBHOOKS_ALLOW_PRIVATE_TARGETS=true: webhooks may target http: URLs and private, loopback and link-local addresses; use it for tests and private deployments only',
    );
  }
  const server = createDeliveryGrpcServer({ store, log, policy, lookup: options.lookup });
  const port = await server.listen(config.DELIVERY_GRPC_ADDR);
  if (redis) server.monitor(() => store.ping());
  log.info({ port, storage: store.kind }, 'delivery service ready');
  // Only watched: a watch has no deadline.
  const messaging = serviceClient(messagingProto().MessagingService, config.MESSAGING_ADDR);
  // Each waits for messaging, storage and the lease on its own: none holds the start up.
  const dispatcher = new Dispatcher(store, (afterId) => messaging.watch('watchEvents', { afterId }), log, options.dispatcher);
  dispatcher.start();
  // Asked before each attempt whether the post an event is about was removed (docs/decisions.md §42).
  const room = serviceClient(roomProto().RoomService, config.ROOM_ADDR);
  const removalOf = roomRemovals((postId) => room.call('getPost', { postId }));
  const worker = new DeliveryWorker(store, log, { ...options.worker, policy, removalOf, ...(options.lookup ? { lookup: options.lookup } : {}) });
  worker.start();
  const messagingHealth = grpcDependency('messaging', config.MESSAGING_ADDR);
  const close = async (): Promise<void> => {
    messagingHealth.close();
    await server.shutdown(config.SHUTDOWN_GRACE_MS);
    messaging.close();
    room.close();
  };
  return {
    port,
    store,
    dispatcher,
    worker,
    dependencies: [{ name: redis ? 'redis' : 'memory', check: () => store.ping() }, messagingHealth],
    drain: () => server.beginDrain(),
    async stop() {
      // First, so another replica takes the lease over at once; attempts in flight finish and are acked.
      await dispatcher.stop();
      await worker.stop();
      await close();
      await store.close();
      await redis?.quit();
    },
    async crash() {
      dispatcher.abandon();
      worker.abandon();
      store.crash();
      await close();
    },
  };
}
