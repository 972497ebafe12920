import { serviceClient } from '@agentroom/kit/grpc';
import { cursorSecretOrRandom } from '@agentroom/kit/http';
import { createLogger, type Logger } from '@agentroom/kit/log';
import { recordPosts } from '@agentroom/kit/metrics';
import type { Dependency } from '@agentroom/kit/process';
import { roomProto } from '@agentroom/proto';
import type { RecordConfig } from './config.js';
import { Archiver, type ArchiverOptions } from './follower.js';
import { parseSearchQuery } from './search/query.js';
import { createRecordGrpcServer } from './server.js';
import type { RecordStore } from './store.js';
import { openRecordStore } from './store-sql.js';

export { databaseEnv, recordEnv, type RecordConfig } from './config.js';
export { createRecordGrpcServer, recordHandlers, RECORD_SERVICE_NAME, toProtoPost, type FollowingState } from './server.js';
export { Archiver, archivedPost, type ArchiverOptions } from './follower.js';
export type { ArchivedMention, ArchivedPost, Page, RecordStatus, RecordStore, SearchHit, SearchQuery, SearchTerm } from './store.js';
export { asUnavailable, type Database, openDatabase, openPGlite, openPostgres, type Queryable, redactUrl, STATEMENT_TIMEOUT_MS } from './db.js';
export { type Migration, migrate, MIGRATIONS } from './migrations.js';
export { openRecordStore, type OpenRecordStoreOptions, PAGE_MAX, RANKED_MAX, SqlRecordStore, type SqlRecordStoreOptions } from './store-sql.js';
export { parseSearchQuery, QUERY_EXPECTED } from './search/query.js';
export { SNIPPET_LENGTH } from './search/snippet.js';

export interface RunningRecord {
  /** The bound gRPC port (useful when the address asked for port 0). */
  port: number;
  store: RecordStore;
  /** Follows the room's posts into the record while this replica holds the lease. */
  archiver: Archiver;
  /** What `/readyz` checks: the record's database. */
  dependencies: Dependency[];
  /** NOT_SERVING from now on, while calls are still served: the first step of shutdown. */
  drain(): void;
  stop(): Promise<void>;
  /** Stops at once as a killed process would: the lease kept until it lapses, nothing more stored (tests). */
  crash(): Promise<void>;
}

export interface StartOptions {
  /** The archiver's lease, retry and retention timings (tests shorten them); its retention days come from the configuration. */
  archiver?: Omit<ArchiverOptions, 'retentionDays'>;
}

/** How often each replica counts the posts the record holds, for `agentroom_record_posts`. */
const COUNT_EVERY_MS = 60_000;

/**
 * Starts the record service: its database (PostgreSQL at DATABASE_URL, else PGlite), the gRPC
 * server, then the archiver that follows the room. `main.ts` and the embedded launcher call this.
 */
export async function start(
  config: RecordConfig,
  log: Logger = createLogger('record', config.LOG_LEVEL, config.LOG_FORMAT),
  options: StartOptions = {},
): Promise<RunningRecord> {
  // Migrations it lacks applied first, under an advisory lock (replicas starting together apply each once).
  const store = await openRecordStore({
    ...(config.DATABASE_URL === undefined ? {} : { url: config.DATABASE_URL }),
    ...(config.DATABASE_READ_URL === undefined ? {} : { readUrl: config.DATABASE_READ_URL }),
    ...(config.DATA_DIR === undefined ? {} : { dataDir: config.DATA_DIR }),
  });
  const room = serviceClient(roomProto().RoomService, config.ROOM_ADDR, { deadlineMs: config.GRPC_DEADLINE_MS });
  // PGlite's folder is one process's at a time: a lease found there is a dead predecessor's, taken over at once (same owner) rather than after it lapses.
  const owner = store.kind === 'pglite' ? { owner: 'the one process of this PGlite' } : {};
  const archiver = new Archiver(store, room, log, { ...options.archiver, ...owner, retentionDays: config.RECORD_RETENTION_DAYS });
  const server = createRecordGrpcServer({
    store,
    log,
    cursorSecret: cursorSecretOrRandom(config.CURSOR_SECRET, log),
    parseQuery: parseSearchQuery,
    state: { lagMs: () => archiver.lagMs, following: () => archiver.isFollowing },
  });
  let port: number;
  try {
    port = await server.listen(config.RECORD_GRPC_ADDR);
  } catch (error) {
    room.close();
    await store.close();
    throw error;
  }
  server.monitor(() => store.ping());
  log.info({ port, storage: store.kind, retentionDays: config.RECORD_RETENTION_DAYS }, 'record service ready');
  // It waits for the room, and for the lease, on its own: neither holds the start up.
  archiver.start();
  const count = (): void => {
    store.status().then(
      (status) => recordPosts.set(status.posts),
      () => undefined,
    );
  };
  count();
  const counter = setInterval(count, COUNT_EVERY_MS);
  counter.unref();
  const close = async (): Promise<void> => {
    clearInterval(counter);
    await server.shutdown(config.SHUTDOWN_GRACE_MS);
    room.close();
  };
  return {
    port,
    store,
    archiver,
    dependencies: [{ name: store.kind, check: () => store.ping() }],
    drain: () => server.beginDrain(),
    async stop() {
      // First, so another replica takes the lease over at once.
      await archiver.stop();
      await close();
      await store.close();
    },
    async crash() {
      archiver.abandon();
      await close();
      await store.close();
    },
  };
}
