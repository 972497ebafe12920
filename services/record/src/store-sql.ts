import type { Via } from '@agentroom/kit/domain';
import { STREAM_ID } from '@agentroom/kit/store';
import { type Database, openDatabase, type Queryable } from './db.js';
import { migrate, REMOVAL_LOCK } from './migrations.js';
import { SqlSafetyStore } from './safety.js';
import { tsqueryOf } from './search/query.js';
import { snippetOf } from './search/snippet.js';
import { searchDocument } from './search/text.js';
import { SEARCH_RANKED_MAX } from '@agentroom/kit/domain';
import type { ArchivedMention, ArchivedPost, ArchivedRemoval, Page, RecordStatus, RecordStore, SearchHit, SearchQuery } from './store.js';

/** The most items one list or search answers, whatever the caller asks: no query reads without a LIMIT. */
export const PAGE_MAX = 100;
/** Relevance ranks at most this many matches of a query, the newest (kit's SEARCH_RANKED_MAX, which the API's words quote). */
export const RANKED_MAX = SEARCH_RANKED_MAX;
/** The newest posts a search reads by key before it chooses how to find older matches (a few milliseconds' reading). */
export const SEARCH_WINDOW = 5_000;
/**
 * Fetching one match found by the word index costs about this many rows read by key (measured on
 * PostgreSQL 15 at a million posts: 0.4 µs a row walked, 4 to 8 µs a match fetched, docs/decisions.md §33).
 */
export const FETCH_COST = 12;
/** PGlite gathers the planner's statistics again after at least this many new posts (and a tenth of the table). */
const ANALYZE_AFTER_MIN = 1_000;
/** How many posts one statement of dropBefore deletes, so a large drop never runs into the statement timeout. */
const DROP_BATCH = 10_000;

/** A stream id `<ms>-<seq>` as the two numbers the table is keyed by (as decimal strings: bound as bigint). */
function keyOf(id: string): { ms: string; seq: string } | undefined {
  if (!STREAM_ID.test(id)) return undefined;
  const [ms = '0', seq = '0'] = id.split('-');
  return { ms, seq };
}

/** What PostgreSQL cannot keep in text: NUL, and a UTF-16 surrogate without its pair. */
// eslint-disable-next-line no-control-regex -- finding NUL is the point
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * A string as the record can keep it: the room refuses these characters in what it takes, but a
 * post that still held one would fail its whole batch again and again and stop the record; it is
 * kept with U+FFFD in their place instead.
 */
function storable(value: string): string {
  return value.replace(UNSTORABLE, '\uFFFD');
}

/** Milliseconds as a bigint parameter: within the range of dates, whatever the caller passes. */
function msParam(ms: number): number {
  return Math.max(-8.64e15, Math.min(8.64e15, Math.ceil(Number.isNaN(ms) ? 0 : ms)));
}

function pageLimit(limit: number): number {
  return Math.min(PAGE_MAX, Math.max(1, Math.floor(Number.isFinite(limit) ? limit : 1)));
}

/** A filter's value that PostgreSQL could not take as text (a NUL): nothing matches it. */
function unmatchable(value: string | undefined): boolean {
  return value !== undefined && value.includes('\u0000');
}

/** A post's key as text (bigints kept exact), named apart from the columns so that ORDER BY means the columns. */
interface Key {
  key_ms: string;
  key_seq: string;
}

/**
 * A match: its key and its rank (ts_rank_cd's float4, read as the number its shortest text says,
 * so that a rank a cursor carries back compares equal to the same post's rank again).
 */
interface Match {
  ms: string;
  seq: string;
  rank: number;
}

/** Whether `a` is older than `b` by key (ms then seq, exact as bigints). */
function older(a: { ms: string; seq: string }, b: { ms: string; seq: string }): boolean {
  const [ams, bms] = [BigInt(a.ms), BigInt(b.ms)];
  return ams < bms || (ams === bms && BigInt(a.seq) < BigInt(b.seq));
}

/** A condition of a WHERE clause, binding its values through `bind` (which answers the placeholder). */
type Condition = (bind: (value: unknown) => string) => string;

/** One statement: its parameters the `first` ones ($1, …), then those `sql` binds. */
function statement(first: readonly unknown[], sql: (bind: (value: unknown) => string) => string): { sql: string; params: unknown[] } {
  const params: unknown[] = [...first];
  return { sql: sql((value) => `$${params.push(value)}`), params };
}

function whereOf(conditions: readonly Condition[], bind: (value: unknown) => string): string {
  return conditions.length === 0 ? '' : `WHERE ${conditions.map((condition) => condition(bind)).join(' AND ')}`;
}

function olderThan(key: { ms: string; seq: string }): Condition {
  return (bind) => `(ms, seq) < (${bind(key.ms)}::bigint, ${bind(key.seq)}::bigint)`;
}

function notOlderThan(key: { ms: string; seq: string }): Condition {
  return (bind) => `(ms, seq) >= (${bind(key.ms)}::bigint, ${bind(key.seq)}::bigint)`;
}

interface PostRow {
  id: string;
  agent_id: string;
  agent_name: string;
  human_label: string;
  text: string;
  via: string;
  reply_to: string | null;
  thread_id: string | null;
  reply_to_agent_id: string | null;
  reply_count: number;
  mentions: ArchivedMention[] | string;
  removed_by: string | null;
  /** When it was removed, in ms since the epoch (as text: bigints kept exact). */
  removed_ms: string | null;
}

const POST_COLUMNS = `ms::text || '-' || seq::text AS id, agent_id, agent_name, human_label, text, via,
  reply_to, thread_id, reply_to_agent_id, reply_count, mentions,
  removed_by, round(extract(epoch FROM removed_at) * 1000)::bigint::text AS removed_ms`;

function postOf(row: PostRow): ArchivedPost {
  const mentions: ArchivedMention[] = typeof row.mentions === 'string' ? (JSON.parse(row.mentions) as ArchivedMention[]) : row.mentions;
  return {
    id: row.id,
    agentId: row.agent_id,
    agentName: row.agent_name,
    humanLabel: row.human_label,
    text: row.text,
    via: row.via as Via,
    createdAt: new Date(Number(row.id.split('-')[0])).toISOString(),
    ...(row.reply_to === null ? {} : { replyTo: row.reply_to }),
    ...(row.thread_id === null ? {} : { threadId: row.thread_id }),
    ...(row.reply_to_agent_id === null ? {} : { replyToAgentId: row.reply_to_agent_id }),
    ...(row.reply_count > 0 && row.thread_id === null ? { replyCount: Number(row.reply_count) } : {}),
    mentions: mentions.map(({ agentId, agentName }) => ({ agentId, agentName })),
    ...(row.removed_by === null
      ? {}
      : { removal: { postId: row.id, by: row.removed_by === 'human' ? 'human' : 'moderator', removedAt: new Date(Number(row.removed_ms)).toISOString() } }),
  };
}

function pageOf<T>(items: T[], limit: number): Page<T> {
  return { items: items.slice(0, limit), hasMore: items.length > limit };
}

export interface SqlRecordStoreOptions {
  /** Where posts are written, and the lease and position kept. */
  write: Database;
  /** Where reads and searches go (a read replica); `write` when unset. */
  read?: Database;
  /** How many matches, the newest, a relevance search ranks; RANKED_MAX by default. */
  rankedMax?: number;
  /** How many of the newest posts a search reads by key before it chooses how to find older matches; SEARCH_WINDOW by default. */
  searchWindow?: number;
  /** What fetching one match through the word index costs, in rows read by key; FETCH_COST by default. */
  fetchCost?: number;
}

/**
 * The record in SQL that runs the same on PostgreSQL 15+ and on PGlite: one table of posts keyed by
 * the room's stream id, a search document per post (a tsvector built in TypeScript, search/text.ts),
 * and one row for the follower's lease and position. Every statement binds its parameters, every
 * list has a LIMIT, and PostgreSQL cancels a statement that runs past its timeout (db.ts).
 */
export class SqlRecordStore implements RecordStore {
  readonly kind: 'postgres' | 'pglite';
  private readonly write: Database;
  private readonly read: Database;
  private readonly rankedMax: number;
  private readonly searchWindow: number;
  private readonly fetchCost: number;
  /** Reports and the audit, on the write database (safety.ts). */
  readonly safety: SqlSafetyStore;
  /** Posts the table held when its statistics were last gathered, and posts kept since (PGlite only). */
  private analyzed = 0;
  private unanalyzed = 0;

  constructor(options: SqlRecordStoreOptions) {
    this.write = options.write;
    this.read = options.read ?? options.write;
    this.rankedMax = Math.max(1, Math.floor(options.rankedMax ?? RANKED_MAX));
    this.searchWindow = Math.max(1, Math.floor(options.searchWindow ?? SEARCH_WINDOW));
    this.fetchCost = Math.max(0, options.fetchCost ?? FETCH_COST);
    this.kind = options.write.kind;
    this.safety = new SqlSafetyStore(this.write);
  }

  async archive(posts: readonly ArchivedPost[]): Promise<number> {
    return (await this.keep(posts)).kept;
  }

  async archiveAndAdvance(owner: string, posts: readonly ArchivedPost[]): Promise<{ kept: number; held: boolean }> {
    return this.keep(posts, owner);
  }

  /** One call of record_archive (migration 2): the batch kept, its replies counted, and with `owner` the position moved, in one round trip. */
  private async keep(posts: readonly ArchivedPost[], owner?: string): Promise<{ kept: number; held: boolean }> {
    if (posts.length === 0 && owner === undefined) return { kept: 0, held: false };
    const rows = posts.map((post) => {
      const key = keyOf(post.id);
      if (key === undefined) throw new Error(`the record keeps posts by stream id; ${JSON.stringify(post.id)} is none`);
      const kept = { text: storable(post.text), agentName: storable(post.agentName), agentId: storable(post.agentId) };
      return {
        ms: key.ms,
        seq: key.seq,
        agent_id: kept.agentId,
        agent_name: kept.agentName,
        human_label: storable(post.humanLabel),
        text: kept.text,
        via: storable(post.via),
        reply_to: post.replyTo ?? null,
        thread_id: post.replyTo === undefined ? null : (post.threadId ?? post.replyTo),
        reply_to_agent_id: post.replyTo === undefined ? null : storable(post.replyToAgentId ?? '') || null,
        mentions: post.mentions.map(({ agentId, agentName }) => ({ agentId: storable(agentId), agentName: storable(agentName) })),
        search: searchDocument(kept),
      };
    });
    // No post, no position to move (the call still says whether the lease is held).
    const last = posts.at(-1);
    const at = last === undefined ? undefined : keyOf(last.id);
    const [result] = await this.write.query<{ kept: number; held: boolean }>('SELECT kept, held FROM record_archive($1::jsonb, $2, $3, $4)', [
      JSON.stringify(rows),
      owner ?? null,
      owner === undefined ? null : (at?.ms ?? null),
      owner === undefined ? null : (at?.seq ?? null),
    ]);
    const kept = Number(result?.kept ?? 0);
    await this.keepStatistics(kept);
    return { kept, held: result?.held === true };
  }

  /**
   * PGlite runs no autovacuum, so nothing else gathers the planner's statistics there: without them
   * it reads every post for a search it would answer from an index (51 ms against 0.3 ms at 100,000
   * posts). ANALYZE once the table grew by a tenth since the last time (150 to 450 ms at 100,000).
   */
  private async keepStatistics(kept: number): Promise<void> {
    if (this.kind !== 'pglite') return;
    this.unanalyzed += kept;
    if (this.unanalyzed < Math.max(ANALYZE_AFTER_MIN, this.analyzed / 10)) return;
    await this.analyze();
  }

  /** Gathers the planner's statistics of the posts now (PGlite: at open, and as the table grows). */
  async analyze(): Promise<void> {
    await this.write.query('ANALYZE posts');
    const [row] = await this.write.query<{ posts: string }>('SELECT posts::text AS posts FROM record_totals WHERE slot = 1');
    this.analyzed = Number(row?.posts ?? 0);
    this.unanalyzed = 0;
  }

  async getPost(id: string): Promise<ArchivedPost | undefined> {
    const key = keyOf(id);
    if (key === undefined) return undefined;
    const [row] = await this.read.query<PostRow>(`SELECT ${POST_COLUMNS} FROM posts WHERE ms = $1 AND seq = $2`, [key.ms, key.seq]);
    return row === undefined ? undefined : postOf(row);
  }

  async listPosts(limit: number, beforeId?: string): Promise<Page<ArchivedPost>> {
    const n = pageLimit(limit);
    if (beforeId === undefined) {
      const rows = await this.read.query<PostRow>(`SELECT ${POST_COLUMNS} FROM posts ORDER BY ms DESC, seq DESC LIMIT $1`, [n + 1]);
      return pageOf(rows.map(postOf), n);
    }
    const key = keyOf(beforeId);
    if (key === undefined) return { items: [], hasMore: false };
    const rows = await this.read.query<PostRow>(
      `SELECT ${POST_COLUMNS} FROM posts WHERE (ms, seq) < ($1::bigint, $2::bigint) ORDER BY ms DESC, seq DESC LIMIT $3`,
      [key.ms, key.seq, n + 1],
    );
    return pageOf(rows.map(postOf), n);
  }

  async listReplies(threadId: string, limit: number, afterId?: string): Promise<Page<ArchivedPost> | undefined> {
    const n = pageLimit(limit);
    const key = keyOf(threadId);
    if (key === undefined) return undefined;
    const [head] = await this.read.query<{ thread_id: string | null }>('SELECT thread_id FROM posts WHERE ms = $1 AND seq = $2', [key.ms, key.seq]);
    if (head === undefined) return undefined;
    // A reply starts no thread (threads are flat): its own replies are in the thread of its first post.
    if (head.thread_id !== null) return { items: [], hasMore: false };
    const after = afterId === undefined ? { ms: '0', seq: '0' } : keyOf(afterId);
    if (after === undefined) return { items: [], hasMore: false };
    const rows = await this.read.query<PostRow>(
      `SELECT ${POST_COLUMNS} FROM posts WHERE thread_id = $1 AND (ms, seq) > ($2::bigint, $3::bigint) ORDER BY ms, seq LIMIT $4`,
      [threadId, after.ms, after.seq, n + 1],
    );
    return pageOf(rows.map(postOf), n);
  }

  async erasePost(removal: ArchivedRemoval): Promise<boolean> {
    const key = keyOf(removal.postId);
    if (key === undefined) return false;
    return this.write.transaction(async (tx) => {
      // The lock record_archive takes too: a batch bringing this post waits, then sees the removal (docs/decisions.md §42).
      await tx.query('SELECT pg_advisory_xact_lock($1)', [REMOVAL_LOCK]);
      await tx.query('INSERT INTO post_removals (ms, seq, removed_by, removed_at) VALUES ($1, $2, $3, $4::timestamptz) ON CONFLICT (ms, seq) DO NOTHING', [
        key.ms,
        key.seq,
        removal.by,
        removal.removedAt,
      ]);
      await tx.query(
        `UPDATE posts SET text = '', mentions = '[]'::jsonb, mention_ids = '{}'::text[], search = ''::tsvector,
           removed_by = r.removed_by, removed_at = r.removed_at
         FROM post_removals AS r
         WHERE posts.ms = $1 AND posts.seq = $2 AND r.ms = posts.ms AND r.seq = posts.seq AND posts.removed_by IS NULL`,
        [key.ms, key.seq],
      );
      const held = await tx.query('SELECT 1 FROM posts WHERE ms = $1 AND seq = $2', [key.ms, key.seq]);
      return held.length === 1;
    });
  }

  async listAgentPosts(agentId: string, limit: number, beforeId?: string): Promise<Page<ArchivedPost>> {
    const n = pageLimit(limit);
    if (unmatchable(agentId)) return { items: [], hasMore: false };
    const before = beforeId === undefined ? undefined : keyOf(beforeId);
    if (beforeId !== undefined && before === undefined) return { items: [], hasMore: false };
    // The author index (agent_id, ms, seq), read backwards.
    const rows = await this.read.query<PostRow>(
      `SELECT ${POST_COLUMNS} FROM posts WHERE agent_id = $1 AND (ms, seq) < ($2::bigint, $3::bigint) ORDER BY ms DESC, seq DESC LIMIT $4`,
      [agentId, before?.ms ?? '9223372036854775807', before?.seq ?? '9223372036854775807', n + 1],
    );
    return pageOf(rows.map(postOf), n);
  }

  async search(query: SearchQuery): Promise<Page<SearchHit>> {
    const n = pageLimit(query.limit);
    const empty: Page<SearchHit> = { items: [], hasMore: false };
    if ([query.author, query.thread, query.mentions].some(unmatchable)) return empty;
    // Conditions on the key alone (a range of the primary key), and those an index of their own serves.
    const range: Condition[] = [];
    const indexed: Condition[] = [];
    if (query.sinceMs !== undefined) range.push((bind) => `ms >= ${bind(msParam(query.sinceMs ?? 0))}`);
    if (query.untilMs !== undefined) range.push((bind) => `ms < ${bind(msParam(query.untilMs ?? 0))}`);
    if (query.author !== undefined) indexed.push((bind) => `agent_id = ${bind(query.author)}`);
    if (query.mentions !== undefined) indexed.push((bind) => `mention_ids @> ${bind([query.mentions])}::text[]`);
    if (query.thread !== undefined) {
      const thread = keyOf(query.thread);
      if (thread === undefined) return empty;
      indexed.push((bind) => `(thread_id = ${bind(query.thread)} OR (ms = ${bind(thread.ms)} AND seq = ${bind(thread.seq)}))`);
    }
    const afterKey = query.after === undefined ? undefined : keyOf(query.after.id);
    if (query.after !== undefined && afterKey === undefined) return empty;
    const after = query.after === undefined || afterKey === undefined ? undefined : { rank: query.after.rank, key: afterKey };
    // Newest first resumes by key; relevance ranks the same newest matches on every page and resumes among them.
    if (query.sort === 'newest' && after !== undefined) range.push(olderThan(after.key));
    const want = query.sort === 'newest' ? n + 1 : this.rankedMax;
    const tsquery = tsqueryOf(query.terms);
    const matches = await this.read.transaction((tx) => this.newestMatches(tx, { tsquery, range, indexed }, want));
    // Relevance: best first, ties newest first, resumed after the last hit of the page before (its rank and key).
    const ordered =
      query.sort === 'newest'
        ? matches
        : matches
            .filter((match) => after === undefined || match.rank < after.rank || (match.rank === after.rank && older(match, after.key)))
            .sort((a, b) => b.rank - a.rank || (older(a, b) ? 1 : -1));
    const page = ordered.slice(0, n + 1);
    if (page.length === 0) return empty;
    const rows = await this.read.query<PostRow>(
      `SELECT ${POST_COLUMNS} FROM posts JOIN unnest($1::bigint[], $2::bigint[]) AS k(kms, kseq) ON posts.ms = k.kms AND posts.seq = k.kseq`,
      [page.map((match) => match.ms), page.map((match) => match.seq)],
    );
    const posts = new Map(rows.map((row) => [row.id, postOf(row)]));
    return pageOf(
      page.flatMap((match) => {
        const post = posts.get(`${match.ms}-${match.seq}`);
        return post === undefined ? [] : [{ post, rank: match.rank, ...snippetOf(post.text, query.terms) }];
      }),
      n,
    );
  }

  /**
   * The keys of the newest `want` posts that match, newest first, found at a cost that does not
   * hang on the planner's guess of how many posts hold the words (docs/decisions.md §33): with a
   * filter that has an index of its own (author, thread, mention), the planner's plan; else the
   * newest `searchWindow` posts are read by key first, and the share of them that matches chooses
   * how the rest is found: walking on by key when matches are common, the word index when rare.
   */
  private async newestMatches(tx: Queryable, filter: { tsquery: string; range: Condition[]; indexed: Condition[] }, want: number): Promise<Match[]> {
    const matching = async (conditions: Condition[], limit: number): Promise<Match[]> => {
      const found = statement(
        [filter.tsquery],
        // Ranked outside: a plan that sorts its matches would otherwise rank every one of them, not only those kept.
        (bind) => `SELECT ms::text AS key_ms, seq::text AS key_seq, ts_rank_cd(search, $1::tsquery) AS rank FROM (
            SELECT ms, seq, search FROM posts
            ${whereOf([() => 'search @@ $1::tsquery', ...filter.range, ...filter.indexed, ...conditions], bind)}
            ORDER BY ms DESC, seq DESC LIMIT ${bind(limit)}
          ) AS found ORDER BY ms DESC, seq DESC`,
      );
      const rows = await tx.query<Key & { rank: number | string }>(found.sql, found.params);
      return rows.map((row) => ({ ms: row.key_ms, seq: row.key_seq, rank: Number(row.rank) }));
    };
    if (filter.indexed.length > 0) return matching([], want);
    // Walking by key: the primary key's index backwards (a planner that counted on few matches would read the whole table and sort it).
    await tx.query('SET LOCAL enable_bitmapscan = off');
    await tx.query('SET LOCAL enable_seqscan = off');
    // Where the window of the newest posts ends (the key of its oldest post; none when the range holds fewer), and how many posts the record keeps.
    const window = statement(
      [],
      (bind) => `SELECT ms::text AS key_ms, seq::text AS key_seq, (SELECT posts FROM record_totals WHERE slot = 1)::text AS kept
        FROM posts ${whereOf(filter.range, bind)} ORDER BY ms DESC, seq DESC OFFSET ${bind(this.searchWindow - 1)} LIMIT 1`,
    );
    const [row] = await tx.query<Key & { kept: string }>(window.sql, window.params);
    const edge = row === undefined ? undefined : { ms: row.key_ms, seq: row.key_seq, kept: Number(row.kept) };
    const recent = await matching(edge === undefined ? [] : [notOlderThan(edge)], want);
    if (edge === undefined || recent.length >= want) return recent;
    // The window's share of matches, as the guess for the older posts: walk on by key while that reads fewer rows than the index's matches cost.
    const share = Math.max(recent.length, 0.5) / this.searchWindow;
    const missing = want - recent.length;
    const walk = missing / share;
    const fetch = share * Math.max(0, edge.kept - this.searchWindow) * this.fetchCost;
    if (walk > fetch) {
      await tx.query('SET LOCAL enable_bitmapscan = on');
      await tx.query('SET LOCAL enable_indexscan = off');
    }
    return [...recent, ...(await matching([olderThan(edge)], missing))];
  }

  async dropBefore(ms: number): Promise<number> {
    let dropped = 0;
    for (;;) {
      const [row] = await this.write.query<{ n: number }>(
        `WITH gone AS (
           DELETE FROM posts WHERE (ms, seq) IN (SELECT ms, seq FROM posts WHERE ms < $1 ORDER BY ms, seq LIMIT $2) RETURNING 1
         )
         UPDATE record_totals SET posts = posts - (SELECT count(*) FROM gone) WHERE slot = 1 RETURNING (SELECT count(*) FROM gone)::integer AS n`,
        [msParam(ms), DROP_BATCH],
      );
      const n = Number(row?.n ?? 0);
      dropped += n;
      if (n < DROP_BATCH) return dropped;
    }
  }

  async status(): Promise<RecordStatus> {
    const [row] = await this.read.query<{ newest: string | null; posts: string | number }>(
      `SELECT (SELECT ms::text || '-' || seq::text FROM posts ORDER BY ms DESC, seq DESC LIMIT 1) AS newest,
         (SELECT posts::text FROM record_totals WHERE slot = 1) AS posts`,
    );
    return { ...(row?.newest == null ? {} : { newestId: row.newest }), posts: Number(row?.posts ?? 0) };
  }

  async ping(): Promise<void> {
    await this.write.query('SELECT 1');
    if (this.read !== this.write) await this.read.query('SELECT 1');
  }

  async close(): Promise<void> {
    await this.write.close();
    if (this.read !== this.write) await this.read.close();
  }

  // The follower's lease and position (kit's LeaseStore), timed by the database's clock so that replicas agree.

  async acquireLease(owner: string, ttlMs: number): Promise<boolean> {
    const rows = await this.write.query(
      `UPDATE record_follower SET lease_owner = $1, lease_expires_at = clock_timestamp() + make_interval(secs => $2::double precision / 1000)
       WHERE slot = 1 AND (lease_owner IS NULL OR lease_owner = $1 OR lease_expires_at <= clock_timestamp())
       RETURNING slot`,
      [owner, ttlMs],
    );
    return rows.length === 1;
  }

  async releaseLease(owner: string): Promise<void> {
    await this.write.query('UPDATE record_follower SET lease_owner = NULL, lease_expires_at = NULL WHERE slot = 1 AND lease_owner = $1', [owner]);
  }

  async position(): Promise<string | undefined> {
    const [row] = await this.write.query<{ id: string | null }>(
      "SELECT position_ms::text || '-' || position_seq::text AS id FROM record_follower WHERE slot = 1 AND position_ms IS NOT NULL",
    );
    return row?.id ?? undefined;
  }

  async advancePosition(owner: string, id: string): Promise<boolean> {
    const key = keyOf(id);
    if (key === undefined) throw new Error(`a position is a stream id; ${JSON.stringify(id)} is none`);
    // Never backwards: a position already past `id` stays where it is (and the call still says the lease is held).
    const rows = await this.write.query(
      `UPDATE record_follower SET
         position_ms = CASE WHEN position_ms IS NULL OR (position_ms, position_seq) < ($2::bigint, $3::bigint) THEN $2::bigint ELSE position_ms END,
         position_seq = CASE WHEN position_ms IS NULL OR (position_ms, position_seq) < ($2::bigint, $3::bigint) THEN $3::bigint ELSE position_seq END
       WHERE slot = 1 AND lease_owner = $1 AND lease_expires_at > clock_timestamp()
       RETURNING slot`,
      [owner, key.ms, key.seq],
    );
    return rows.length === 1;
  }
}

export interface OpenRecordStoreOptions {
  /** DATABASE_URL: a real PostgreSQL; unset, PGlite in this process. */
  url?: string;
  /** DATABASE_READ_URL: a read replica for reads and searches (PostgreSQL only). */
  readUrl?: string;
  /** DATA_DIR: PGlite's folder; unset, in memory. */
  dataDir?: string;
}

/** Opens the record's database(s) as configured, applies the migrations it lacks (under the advisory lock), and answers the store. */
export async function openRecordStore(options: OpenRecordStoreOptions): Promise<SqlRecordStore> {
  const write = await openDatabase({
    ...(options.url === undefined ? {} : { url: options.url }),
    ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }),
  });
  try {
    await migrate(write);
    const read =
      options.readUrl === undefined || options.readUrl === '' || write.kind === 'pglite'
        ? undefined
        : await openDatabase({ url: options.readUrl, variable: 'DATABASE_READ_URL' });
    const store = new SqlRecordStore({ write, ...(read === undefined ? {} : { read }) });
    // A folder kept from an earlier start holds posts the planner has no statistics of yet.
    if (write.kind === 'pglite') await store.analyze();
    return store;
  } catch (error) {
    await write.close().catch(() => undefined);
    throw error;
  }
}
