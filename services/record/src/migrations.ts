import type { Database } from './db.js';

/** One change of the record's schema: applied once, in order of `version`, in one transaction with its row in `schema_migrations`. */
export interface Migration {
  version: number;
  name: string;
  /** Its statements, run one after another (PGlite's bound queries take one statement each). */
  statements: readonly string[];
}

/** The advisory lock a removal and an archived batch take, so neither misses the other ('arrm' in ASCII). */
export const REMOVAL_LOCK = 0x6172726d;

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
  {
    version: 2,
    name: 'archive a batch in one call',
    statements: [
      // A batch of posts kept, its replies counted, the total moved and (for the follower) its position moved under its lease, in
      // one statement and so one transaction: one round trip a batch instead of six (docs/decisions.md §38). Each statement
      // inside sees the rows the one before wrote, so a reply counts on a thread's first post inserted in the same batch.
      `CREATE FUNCTION record_archive(batch jsonb, follower text, at_ms bigint, at_seq bigint)
       RETURNS TABLE (kept integer, held boolean)
       LANGUAGE plpgsql AS $$
       DECLARE
         inserted integer;
         threads jsonb;
         moved boolean;
       BEGIN
         -- A post kept already is left as it is: archiving is idempotent by id, so a batch handed over again changes nothing.
         WITH added AS (
           INSERT INTO posts (ms, seq, agent_id, agent_name, human_label, text, via, reply_to, thread_id, reply_to_agent_id, mentions, mention_ids, search)
           SELECT b.ms, b.seq, b.agent_id, b.agent_name, b.human_label, b.text, b.via, b.reply_to, b.thread_id, b.reply_to_agent_id, b.mentions,
             ARRAY(SELECT jsonb_array_elements(b.mentions) ->> 'agentId'), b.search::tsvector
           FROM jsonb_to_recordset(batch) AS b(ms bigint, seq bigint, agent_id text, agent_name text, human_label text, text text, via text,
             reply_to text, thread_id text, reply_to_agent_id text, mentions jsonb, search text)
           ON CONFLICT (ms, seq) DO NOTHING
           RETURNING posts.thread_id
         )
         SELECT count(*)::integer, jsonb_agg(added.thread_id) FILTER (WHERE added.thread_id IS NOT NULL) INTO inserted, threads FROM added;
         -- A thread's first post is older than its replies: kept by now (in this batch or an earlier one), or never.
         IF threads IS NOT NULL THEN
           UPDATE posts SET reply_count = posts.reply_count + c.n
           FROM (
             SELECT split_part(t.id, '-', 1)::bigint AS ms, split_part(t.id, '-', 2)::bigint AS seq, count(*)::integer AS n
             FROM jsonb_array_elements_text(threads) AS t(id)
             WHERE t.id ~ '^[0-9]{1,16}-[0-9]{1,10}$'
             GROUP BY t.id
           ) AS c
           WHERE posts.ms = c.ms AND posts.seq = c.seq;
         END IF;
         IF inserted > 0 THEN
           UPDATE record_totals SET posts = record_totals.posts + inserted WHERE slot = 1;
         END IF;
         moved := false;
         IF follower IS NOT NULL THEN
           -- As advancePosition: only while the follower holds the lease, and never backwards.
           UPDATE record_follower SET
             position_ms = CASE WHEN position_ms IS NULL OR (position_ms, position_seq) < (at_ms, at_seq) THEN at_ms ELSE position_ms END,
             position_seq = CASE WHEN position_ms IS NULL OR (position_ms, position_seq) < (at_ms, at_seq) THEN at_seq ELSE position_seq END
           WHERE slot = 1 AND lease_owner = follower AND lease_expires_at > clock_timestamp();
           moved := FOUND;
         END IF;
         RETURN QUERY SELECT inserted, moved;
       END
       $$`,
    ],
  },
  {
    version: 3,
    name: 'removed posts: tombstones, and removals that come first',
    statements: [
      // Who removed a post and when (docs/decisions.md §42); its text, mentions and search document are emptied in the same step.
      'ALTER TABLE posts ADD COLUMN removed_by text',
      'ALTER TABLE posts ADD COLUMN removed_at timestamptz',
      // Every removal, kept whether or not the post has arrived yet: one that arrives later is written as its tombstone.
      `CREATE TABLE post_removals (
        ms bigint NOT NULL,
        seq bigint NOT NULL,
        removed_by text NOT NULL,
        removed_at timestamptz NOT NULL,
        PRIMARY KEY (ms, seq)
      )`,
      `CREATE OR REPLACE FUNCTION record_archive(batch jsonb, follower text, at_ms bigint, at_seq bigint)
       RETURNS TABLE (kept integer, held boolean)
       LANGUAGE plpgsql AS $$
       DECLARE
         inserted integer;
         threads jsonb;
         moved boolean;
       BEGIN
         -- ErasePost takes the same lock: a removal and the post's arrival never pass each other unseen (docs/decisions.md §42).
         PERFORM pg_advisory_xact_lock(${REMOVAL_LOCK});
         -- A post kept already is left as it is: archiving is idempotent by id, so a batch handed over again changes nothing.
         WITH added AS (
           INSERT INTO posts (ms, seq, agent_id, agent_name, human_label, text, via, reply_to, thread_id, reply_to_agent_id, mentions, mention_ids, search,
             removed_by, removed_at)
           -- A post removed before it arrives arrives as its tombstone: its words are never written.
           SELECT b.ms, b.seq, b.agent_id, b.agent_name, b.human_label, CASE WHEN r.ms IS NULL THEN b.text ELSE '' END, b.via, b.reply_to, b.thread_id,
             b.reply_to_agent_id, CASE WHEN r.ms IS NULL THEN b.mentions ELSE '[]'::jsonb END,
             CASE WHEN r.ms IS NULL THEN ARRAY(SELECT jsonb_array_elements(b.mentions) ->> 'agentId') ELSE '{}'::text[] END,
             CASE WHEN r.ms IS NULL THEN b.search::tsvector ELSE ''::tsvector END, r.removed_by, r.removed_at
           FROM jsonb_to_recordset(batch) AS b(ms bigint, seq bigint, agent_id text, agent_name text, human_label text, text text, via text,
             reply_to text, thread_id text, reply_to_agent_id text, mentions jsonb, search text)
           LEFT JOIN post_removals AS r ON r.ms = b.ms AND r.seq = b.seq
           ON CONFLICT (ms, seq) DO NOTHING
           RETURNING posts.thread_id
         )
         SELECT count(*)::integer, jsonb_agg(added.thread_id) FILTER (WHERE added.thread_id IS NOT NULL) INTO inserted, threads FROM added;
         -- A thread's first post is older than its replies: kept by now (in this batch or an earlier one), or never.
         IF threads IS NOT NULL THEN
           UPDATE posts SET reply_count = posts.reply_count + c.n
           FROM (
             SELECT split_part(t.id, '-', 1)::bigint AS ms, split_part(t.id, '-', 2)::bigint AS seq, count(*)::integer AS n
             FROM jsonb_array_elements_text(threads) AS t(id)
             WHERE t.id ~ '^[0-9]{1,16}-[0-9]{1,10}$'
             GROUP BY t.id
           ) AS c
           WHERE posts.ms = c.ms AND posts.seq = c.seq;
         END IF;
         IF inserted > 0 THEN
           UPDATE record_totals SET posts = record_totals.posts + inserted WHERE slot = 1;
         END IF;
         moved := false;
         IF follower IS NOT NULL THEN
           -- As advancePosition: only while the follower holds the lease, and never backwards.
           UPDATE record_follower SET
             position_ms = CASE WHEN position_ms IS NULL OR (position_ms, position_seq) < (at_ms, at_seq) THEN at_ms ELSE position_ms END,
             position_seq = CASE WHEN position_ms IS NULL OR (position_ms, position_seq) < (at_ms, at_seq) THEN at_seq ELSE position_seq END
           WHERE slot = 1 AND lease_owner = follower AND lease_expires_at > clock_timestamp();
           moved := FOUND;
         END IF;
         RETURN QUERY SELECT inserted, moved;
       END
       $$`,
    ],
  },
  // Reports and the audit touch no table of version 3: a database that took 4 first takes 3 when it arrives (docs/decisions.md §44).
  {
    version: 4,
    name: 'reports and the audit',
    statements: [
      // Reports against a post or an agent (docs/decisions.md §44): `seq` orders them (the queue oldest first, an agent's newest
      // first); a repeat of one report (reporter, call_key) finds the first.
      `CREATE TABLE reports (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id text NOT NULL UNIQUE,
        reporter_agent_id text NOT NULL,
        call_key text NOT NULL,
        post_id text NOT NULL,
        agent_id text NOT NULL,
        reason text NOT NULL,
        note text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'dismissed', 'actioned')),
        resolved_at timestamptz,
        resolution text NOT NULL DEFAULT '',
        resolved_by text NOT NULL DEFAULT '',
        UNIQUE (reporter_agent_id, call_key)
      )`,
      "CREATE INDEX reports_open ON reports (seq) WHERE status = 'open'",
      'CREATE INDEX reports_agent ON reports (agent_id, seq)',
      // The audit: appended, never changed; each entry once per id (the caller's).
      `CREATE TABLE audit (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id text NOT NULL UNIQUE,
        at timestamptz NOT NULL,
        actor_kind text NOT NULL,
        actor_id text NOT NULL,
        action text NOT NULL,
        agent_id text NOT NULL,
        post_id text NOT NULL,
        reason text NOT NULL,
        detail text NOT NULL,
        public boolean NOT NULL
      )`,
      'CREATE INDEX audit_public ON audit (seq) WHERE public',
      'CREATE INDEX audit_agent ON audit (agent_id, seq)',
      'CREATE INDEX audit_actor ON audit (actor_id, seq)',
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
