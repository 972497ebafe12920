import { randomBytes, randomUUID } from 'node:crypto';
import { loadConfig } from '@agentroom/kit/config';
import { createLogger, type Logger } from '@agentroom/kit/log';
import { type ServiceClient, serviceClient } from '@agentroom/kit/grpc';
import { type LocalPostgres, startPostgresServer } from '@agentroom/kit/local';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import { type Post__Output, recordProto, type RecordServiceClient, roomProto, type RoomServiceClient } from '@agentroom/proto';
import { openDatabase } from '../src/db.js';
import { recordEnv, type RunningRecord, start, type StartOptions } from '../src/index.js';

/** The deployment's one cursor secret: the room and the record sign with it. */
export const CURSOR_SECRET = randomBytes(32).toString('base64url');

/** A lease that lapses in a second, so a takeover is seen within a test. */
export const FAST = { leaseMs: 1_000, renewMs: 250, retryMs: 50, maxRetryMs: 250 };

export type RoomClient = ServiceClient<RoomServiceClient>;
export type RecordClient = ServiceClient<RecordServiceClient>;

/** A room of its own process (in memory), as in a deployment, and its client. */
export async function startRoom(): Promise<{ process: ServiceProcess; client: RoomClient }> {
  const room = await startServiceProcess({
    service: 'room',
    addressVariable: 'ROOM_GRPC_ADDR',
    env: { LOG_LEVEL: 'silent', CURSOR_SECRET, SHUTDOWN_GRACE_MS: '500' },
  });
  return { process: room, client: serviceClient(roomProto().RoomService, room.address) };
}

/** A PostgreSQL 15 of this test file's own (no fsync: a test's data need not survive the machine). */
export function startPostgres(): Promise<LocalPostgres> {
  return startPostgresServer({ unsafeNoFsync: true });
}

/** A fresh, empty database on `postgres`, for one test: its URL. */
export async function freshDatabase(postgres: LocalPostgres): Promise<string> {
  const name = `record_${randomUUID().replaceAll('-', '')}`;
  const admin = await openDatabase({ url: postgres.url });
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.close();
  }
  const url = new URL(postgres.url);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The record service in this process, on `databaseUrl`, following the room at `roomAddress`. */
export function startRecord(
  databaseUrl: string,
  roomAddress: string,
  env: Record<string, string> = {},
  options: StartOptions = { archiver: FAST },
  log?: Logger,
): Promise<RunningRecord> {
  const config = loadConfig(recordEnv, {
    LOG_LEVEL: 'silent',
    SHUTDOWN_GRACE_MS: '500',
    RECORD_GRPC_ADDR: '127.0.0.1:0',
    ROOM_ADDR: roomAddress,
    DATABASE_URL: databaseUrl,
    CURSOR_SECRET,
    ...env,
  });
  return start(config, log, options);
}

/** A logger whose lines' messages land in `messages`, for tests of what a process says. */
export function capturedLog(): { log: Logger; messages: string[] } {
  const messages: string[] = [];
  const log = createLogger('record', 'info', { write: (line: string) => void messages.push((JSON.parse(line) as { msg: string }).msg) });
  return { log, messages };
}

export function recordClient(port: number): RecordClient {
  return serviceClient(recordProto().RecordService, `127.0.0.1:${port}`);
}

/** A room process and the record following it, with their clients, as a suite starts them. */
export interface RoomAndRecord {
  roomProcess: ServiceProcess;
  room: RoomClient;
  running: RunningRecord;
  record: RecordClient;
  /** Stops both and closes their clients; the database is the caller's to stop. */
  stop(): Promise<void>;
}

/** Starts a room process (while `postgres` starts) and the record following it on `databaseOf(postgres)`, a fresh database by default. */
export async function startRoomAndRecord(
  postgres: Promise<LocalPostgres>,
  databaseOf: (postgres: LocalPostgres) => Promise<string> = freshDatabase,
): Promise<RoomAndRecord> {
  const [server, { process: roomProcess, client: room }] = await Promise.all([postgres, startRoom()]);
  const running = await startRecord(await databaseOf(server), roomProcess.address);
  const record = recordClient(running.port);
  return {
    roomProcess,
    room,
    running,
    record,
    async stop() {
      record.close();
      await running.stop();
      room.close();
      await roomProcess.stop();
    },
  };
}

/** Every post the record holds, newest first, paged through its own cursors `limit` at a time (repeats kept, so a duplicate shows). */
export async function archivedIds(port: number, limit = 50): Promise<string[]> {
  const client = recordClient(port);
  try {
    const ids: string[] = [];
    let cursor = '';
    do {
      const page = await client.call('listArchivedPosts', { limit, cursor });
      ids.push(...page.posts.map((p) => p.id));
      cursor = page.nextCursor;
    } while (cursor !== '');
    return ids;
  } finally {
    client.close();
  }
}

/** An agent of the room, made through its gRPC API: its id. */
export async function agent(room: RoomClient, name: string): Promise<string> {
  const answer = await room.call('upsertAgent', {
    agent: { id: `a_${randomBytes(8).toString('hex')}`, agentName: name, humanLabel: `${name}'s human`, scopes: ['posts:write'], createdAt: '', revokedAt: '' },
  });
  return answer.agent?.id ?? '';
}

/** A post by `agentId` (a reply when `replyTo` is given), as the room answers it. */
export async function post(room: RoomClient, agentId: string, text: string, replyTo = ''): Promise<Post__Output> {
  const answer = await room.call('createPost', { agentId, text, via: 'VIA_MCP', replyTo, callKey: randomUUID() });
  if (!answer.post) throw new Error('CreatePost answered no post');
  return answer.post;
}

/** Resolves once the record holds `count` posts (its status), or fails after `timeoutMs`. */
export async function recordHolds(record: RecordClient, count: number, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await record.call('getRecordStatus', {});
    if (Number(status.posts) >= count) return;
    if (Date.now() > deadline) throw new Error(`the record holds ${status.posts} posts, not ${count}, after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
