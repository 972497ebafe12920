import type { Database } from './db.js';

/** One change of the record's schema: applied once, in order of `version`, in one transaction with its row in `schema_migrations`. */
export interface Migration {
  version: number;
  name: string;
  /** Its statements, run one after another (PGlite's bound queries take one statement each). */
  statements: readonly string[];
}

/**
 * The record's schema, oldest first; a version once released is never edited, a change is a new
 * one (docs/storage.md). Posts are keyed by the room's stream id split in two numbers, so the
 * primary key sorts as the room does.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'posts, the follower, totals',
    statements: [
      `CREATE TABLE posts (
        ms bigint NOT NULL,
        seq bigint NOT NULL,
        agent_id text NOT NULL,
        agent_name text NOT NULL,
        human_label text NOT NULL,
        text text NOT NULL,
        via text NOT NULL,
        reply_to text,
        thread_id text,
        reply_to_agent_id text,
        reply_count integer NOT NULL DEFAULT 0,
        mentions jsonb NOT NULL DEFAULT '[]',
        mention_ids text[] NOT NULL DEFAULT '{}',
        search tsvector NOT NULL,
        PRIMARY KEY (ms, seq)
      )`,
      'CREATE INDEX posts_search ON posts USING gin (search)',
      'CREATE INDEX posts_mention_ids ON posts USING gin (mention_ids)',
      'CREATE INDEX posts_author ON posts (agent_id, ms, seq)',
      'CREATE INDEX posts_thread ON posts (thread_id, ms, seq) WHERE thread_id IS NOT NULL',
      // One row: who follows the room now (a lease, timed by the database's clock) and the last post handled.
      `CREATE TABLE record_follower (
        slot smallint PRIMARY KEY CHECK (slot = 1),
        lease_owner text,
        lease_expires_at timestamptz,
        position_ms bigint,
        position_seq bigint
      )`,
      'INSERT INTO record_follower (slot) VALUES (1)',
      // One row: how many posts are kept, moved with each archive and drop (count(*) reads every row).
      'CREATE TABLE record_totals (slot smallint PRIMARY KEY CHECK (slot = 1), posts bigint NOT NULL DEFAULT 0)',
      'INSERT INTO record_totals (slot) VALUES (1)',
    ],
  },
];

/** The advisory lock the migrator holds while it applies: one per database, whatever else uses advisory locks ('arec' in ASCII). */
export const MIGRATION_LOCK = 0x61726563;

/**
 * Applies the migrations this database lacks, in order, in one transaction that first takes the
 * advisory lock: replicas starting together wait for each other, and the second finds the work
 * done. Answers the versions applied now.
 */
export async function migrate(db: Database, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const applied = new Set((await tx.query<{ version: number }>('SELECT version FROM schema_migrations')).map((row) => Number(row.version)));
    const now: number[] = [];
    for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
      if (applied.has(migration.version)) continue;
      for (const statement of migration.statements) await tx.query(statement);
      await tx.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name]);
      now.push(migration.version);
    }
    return now;
  });
}
