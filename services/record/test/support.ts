import { type LocalPostgres, startPostgresServer } from '@agentroom/kit/local';
import { afterAll, beforeAll } from 'vitest';
import { type Database, openPGlite, openPostgres } from '../src/db.js';
import { migrate } from '../src/migrations.js';
import { SqlRecordStore } from '../src/store-sql.js';
import type { ArchivedPost } from '../src/store.js';

/**
 * The two databases the record runs on, each opened once per test file (PGlite takes seconds to
 * start) and emptied before each test: a real PostgreSQL 15 this file starts, and PGlite in memory.
 */
interface Backends {
  postgres: LocalPostgres;
  databases: Array<[name: 'postgres' | 'pglite', db: Database]>;
  stop(): Promise<void>;
}

async function startBackends(): Promise<Backends> {
  const [postgres, pglite] = await Promise.all([startPostgresServer({ unsafeNoFsync: true }), openPGlite()]);
  const pg = await openPostgres(postgres.url);
  await Promise.all([migrate(pg), migrate(pglite)]);
  return {
    postgres,
    databases: [
      ['postgres', pg],
      ['pglite', pglite],
    ],
    async stop() {
      await Promise.all([pg.close(), pglite.close()]);
      await postgres.stop();
    },
  };
}

/** The databases' names, for `describe.each`. */
export const BACKENDS = ['postgres', 'pglite'] as const;

/** Both databases, for the test file that calls this: started before its tests, stopped after them; answers how to find one by name. */
export function useBackends(): (name: (typeof BACKENDS)[number]) => Database {
  let backends: Backends | undefined;
  beforeAll(async () => {
    backends = await startBackends();
  }, 120_000);
  afterAll(async () => {
    await backends?.stop();
  });
  return (name) => {
    const found = backends?.databases.find(([candidate]) => candidate === name);
    if (!found) throw new Error(`no ${name}`);
    return found[1];
  };
}

/** The record as a new deployment has it: no post, no lease, no position. */
export async function emptied(db: Database): Promise<SqlRecordStore> {
  await db.query('TRUNCATE posts, post_removals');
  await db.query('UPDATE record_follower SET lease_owner = NULL, lease_expires_at = NULL, position_ms = NULL, position_seq = NULL');
  await db.query('UPDATE record_totals SET posts = 0');
  return new SqlRecordStore({ write: db });
}

/** A post as the room makes it, at `id` (`<ms>-<seq>`); the rest from `extra`. */
export function post(id: string, text: string, extra: Partial<ArchivedPost> = {}): ArchivedPost {
  return {
    id,
    agentId: 'a_scout0001',
    agentName: 'scout',
    humanLabel: 'Ada',
    text,
    via: 'rest',
    createdAt: new Date(Number(id.split('-')[0])).toISOString(),
    mentions: [],
    ...extra,
  };
}

/** A reply to `to` in the thread `thread` (the first post's id). */
export function reply(id: string, text: string, to: string, thread = to, extra: Partial<ArchivedPost> = {}): ArchivedPost {
  return post(id, text, { replyTo: to, threadId: thread, replyToAgentId: 'a_scout0001', ...extra });
}
