// The search rows: the record holding a million posts on a real PostgreSQL 15 (and 100,000 in
// PGlite, the embedded default), asked over gRPC as edge asks it: two-word searches, by relevance
// and newest first, and pages of the archive deep past the room's window, one call at a time.
// The PostgreSQL archive is written straight through the record's store in large batches (the
// follower's own write path, without a room in front: a million posts through the room would take
// most of an hour here); PGlite's is filled as `npm start` fills it, by the record following a room.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { serviceClient } from '@agentroom/kit/grpc';
import { freePort, startPostgresServer } from '@agentroom/kit/local';
import { roomProto } from '@agentroom/proto';
import { openPostgres, openRecordStore, parseSearchQuery, type RecordStore } from '@agentroom/record';
import { Corpus, MatchCounter, TWO_WORD_QUERIES } from './corpus.js';
import { progress } from './progress.js';
import { type RecordClient, type RecordProcess, rssBytes, startRecordProcess, startRoomProcess } from './record-process.js';
import { atMostCheck, type Check, type Context, figure, type Measurement, reported } from './row.js';
import { percentile } from './stats.js';

/** Posts written per transaction while seeding, and transactions at once (PostgreSQL only: PGlite has one connection). */
const SEED_BATCH = 5_000;
const SEED_PARALLEL = 2;
/** Each query of TWO_WORD_QUERIES, in each sort, this many times (after one untimed round). */
const SEARCH_ROUNDS = 12;
/** Pages of the archive asked, each from its own cursor deep in it. */
const DEEP_PAGES = 400;
const PAGE_LIMIT = 20;
const TARGET = { searchP99Ms: 50, pageP99Ms: 20 } as const;
const MIB = 1024 * 1024;
/** The archive ends a day ago, so the posts a room makes meanwhile come after it. */
const DAY_MS = 86_400_000;

/** Posts in each archive; BENCH_SEARCH_POSTS sets PostgreSQL's for a quicker look (the target is at a million). */
export const RECORD_SIZES = { postgres: Number(process.env.BENCH_SEARCH_POSTS ?? 1_000_000), pglite: 100_000 } as const;

/** What the rows ask of the record: over its gRPC API (a record process), or of its store in this process. */
interface Reader {
  through: string;
  /** One page of hits; answers how many. */
  search(q: string, sort: 'relevance' | 'newest'): Promise<number>;
  /** The page before this post id: answers what continues after it (a cursor), or undefined at the end. */
  pageBefore(id: string): Promise<string | undefined>;
  /** The page after `pageBefore`'s answer; answers how many posts it held. */
  page(cursor: string): Promise<number>;
}

function grpcReader(client: RecordClient, through: string): Reader {
  return {
    through,
    async search(q, sort) {
      return (await client.call('searchPosts', { q, sort: sort === 'relevance' ? 'SEARCH_SORT_RELEVANCE' : 'SEARCH_SORT_NEWEST', limit: PAGE_LIMIT })).hits
        .length;
    },
    async pageBefore(id) {
      const page = await client.call('listArchivedPosts', { beforeId: id, limit: PAGE_LIMIT });
      return page.nextCursor === '' ? undefined : page.nextCursor;
    },
    async page(cursor) {
      return (await client.call('listArchivedPosts', { cursor, limit: PAGE_LIMIT })).posts.length;
    },
  };
}

/** The store itself, when there is no record service to ask: no gRPC, no cursor signing, said so in the row. */
function storeReader(store: RecordStore): Reader {
  return {
    through: 'the record store in the bench process (no record service built: services/record/dist/main.js is missing)',
    async search(q, sort) {
      return (await store.search({ terms: parseSearchQuery(q), sort, limit: PAGE_LIMIT })).items.length;
    },
    async pageBefore(id) {
      const page = await store.listPosts(PAGE_LIMIT, id);
      return page.hasMore ? page.items.at(-1)?.id : undefined;
    },
    async page(cursor) {
      return (await store.listPosts(PAGE_LIMIT, cursor)).items.length;
    },
  };
}

/** Whether the record service is built, so the rows can ask it over gRPC. */
function recordServiceBuilt(): boolean {
  return existsSync(fileURLToPath(new URL('../../services/record/dist/main.js', import.meta.url)));
}

interface Timed {
  p50Ms: number;
  p99Ms: number;
  samples: number;
}

function timed(latencies: number[]): Timed {
  const sorted = [...latencies].sort((a, b) => a - b);
  return { p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), samples: sorted.length };
}

/** Writes posts 0 to count − 1 of `corpus` through `store.archive`, oldest first. */
async function seed(store: RecordStore, corpus: Corpus, count: number, parallel: number, counter: MatchCounter): Promise<number> {
  const started = performance.now();
  let next = 0;
  let shown = 0;
  let done = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const from = next;
      next = Math.min(count, next + SEED_BATCH);
      const batch = [];
      for (let i = from; i < next; i += 1) {
        const post = corpus.at(i);
        counter.add(post);
        batch.push(post);
      }
      const written = await store.archive(batch);
      if (written !== batch.length) throw new Error(`archive kept ${written} of ${batch.length} new posts`);
      done += written;
      if (done - shown >= 100_000 || done === count) {
        shown = done;
        const seconds = (performance.now() - started) / 1_000;
        progress(`  seeded ${done.toLocaleString('en-US')} posts in ${seconds.toFixed(0)} s (${Math.round(done / seconds).toLocaleString('en-US')} posts/s)`);
      }
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return (performance.now() - started) / 1_000;
}

/** The two-word queries, each by relevance and newest first, one call at a time: every latency, and each query's. */
async function searches(reader: Reader): Promise<{ all: Timed; byQuery: Record<string, Timed & { hitsOnFirstPage: number }>; failures: string[] }> {
  const latencies: number[] = [];
  const byQuery: Record<string, { latencies: number[]; hits: number }> = {};
  const failures: string[] = [];
  for (let round = 0; round <= SEARCH_ROUNDS; round += 1) {
    for (const q of TWO_WORD_QUERIES) {
      for (const sort of ['SEARCH_SORT_RELEVANCE', 'SEARCH_SORT_NEWEST'] as const) {
        const started = performance.now();
        try {
          const hits = await reader.search(q, sort === 'SEARCH_SORT_RELEVANCE' ? 'relevance' : 'newest');
          const ms = performance.now() - started;
          if (round === 0) continue;
          latencies.push(ms);
          const key = `${q} (${sort === 'SEARCH_SORT_RELEVANCE' ? 'relevance' : 'newest'})`;
          byQuery[key] ??= { latencies: [], hits };
          byQuery[key].latencies.push(ms);
        } catch (error) {
          failures.push(`search ${JSON.stringify(q)} ${sort}: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    }
  }
  return {
    all: timed(latencies),
    byQuery: Object.fromEntries(Object.entries(byQuery).map(([key, { latencies: ms, hits }]) => [key, { ...timed(ms), hitsOnFirstPage: hits }])),
    failures,
  };
}

/** Pages of 20 from cursors spread over the archive's oldest 90 %: each cursor fetched first (untimed), then each page timed. */
async function deepPages(reader: Reader, idAt: (index: number) => string, count: number): Promise<{ timed: Timed; failures: string[] }> {
  const cursors: string[] = [];
  const failures: string[] = [];
  for (let i = 0; i < DEEP_PAGES; i += 1) {
    // Spread evenly, and never two neighbours in a row: no page is the one just read.
    const index = Math.floor(((i * 7_919) % DEEP_PAGES) * ((count * 0.9) / DEEP_PAGES)) + PAGE_LIMIT * 2;
    const cursor = await reader.pageBefore(idAt(index));
    if (cursor === undefined) failures.push(`the page before post ${index} carried no next_cursor`);
    else cursors.push(cursor);
  }
  const latencies: number[] = [];
  for (const cursor of cursors) {
    const started = performance.now();
    const posts = await reader.page(cursor);
    latencies.push(performance.now() - started);
    if (posts !== PAGE_LIMIT) failures.push(`a page deep in the archive held ${posts} posts, not ${PAGE_LIMIT}`);
  }
  return { timed: timed(latencies), failures: failures.slice(0, 5) };
}

function searchChecks(searched: Awaited<ReturnType<typeof searches>>, paged: Awaited<ReturnType<typeof deepPages>>, size: string): Check[] {
  const queries = `${TWO_WORD_QUERIES.length} queries × 2 sorts × ${SEARCH_ROUNDS}`;
  return [
    atMostCheck(`search p99, 2 words, ${size}`, searched.all.p99Ms, TARGET.searchP99Ms, 'ms', ` (p50 ${figure(searched.all.p50Ms)} ms; ${queries})`),
    atMostCheck(`deep page p99, ${size}`, paged.timed.p99Ms, TARGET.pageP99Ms, 'ms', ` (p50 ${figure(paged.timed.p50Ms)} ms; ${paged.timed.samples} cursors)`),
  ];
}

/** Search and deep pages over a million posts on PostgreSQL 15, through the record service's gRPC API; disk per post. */
export async function searchPostgresRow(_context: Context): Promise<Measurement> {
  const size = RECORD_SIZES.postgres;
  progress('  starting PostgreSQL 15 (fsync off: the figures are reads; the disk figure is the same either way)…');
  const postgres = await startPostgresServer({ unsafeNoFsync: true });
  let record: RecordProcess | undefined;
  let store: RecordStore | undefined;
  try {
    store = await openRecordStore({ url: postgres.url });
    const corpus = new Corpus(Date.now() - DAY_MS - size * 2_600);
    const counter = new MatchCounter();
    progress(`  seeding ${size.toLocaleString('en-US')} posts through the record's store, ${SEED_BATCH.toLocaleString('en-US')} a transaction…`);
    const seedSeconds = await seed(store, corpus, size, SEED_PARALLEL, counter);
    // One connection, and room for VACUUM: the record's own statement timeout (5 s) is for its queries, not for maintenance.
    const db = await openPostgres(postgres.url, { max: 1, statementTimeoutMs: 30 * 60_000 });
    let disk: { tables: number; database: number; posts: number };
    try {
      // As autovacuum would after a bulk load: the planner's statistics, and the visibility map index-only scans use.
      progress('  VACUUM ANALYZE, then sizes…');
      await db.query('VACUUM ANALYZE');
      const [row] = await db.query<{ tables: string; database: string; posts: string }>(
        `SELECT (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE c.relkind = 'r' AND n.nspname = 'public')::text AS tables,
                pg_database_size(current_database())::text AS database,
                (SELECT count(*) FROM posts)::text AS posts`,
      );
      disk = { tables: Number(row?.tables), database: Number(row?.database), posts: Number(row?.posts) };
    } finally {
      await db.close();
    }
    let reader: Reader;
    if (recordServiceBuilt()) {
      await store.close();
      store = undefined;
      // The record as deployed, on that database; its follower has no room to follow here (a port nothing listens on) and keeps trying.
      record = await startRecordProcess('record-postgres', { DATABASE_URL: postgres.url, ROOM_ADDR: `127.0.0.1:${await freePort()}` });
      reader = grpcReader(record.client, 'the record service (services/record/dist/main.js) over gRPC, one call at a time');
    } else reader = storeReader(store);
    progress(`  searching: ${TWO_WORD_QUERIES.length} two-word queries, by relevance and newest, ${SEARCH_ROUNDS} rounds, through ${reader.through}…`);
    const searched = await searches(reader);
    progress(`  paging: ${DEEP_PAGES} pages of ${PAGE_LIMIT} from cursors deep in the archive…`);
    const paged = await deepPages(reader, (index) => corpus.id(index), size);
    const bytesPerPost = disk.tables / disk.posts;
    const label = `${size.toLocaleString('en-US')} posts`;
    return {
      p50Ms: searched.all.p50Ms,
      p99Ms: searched.all.p99Ms,
      checks: [
        ...searchChecks(searched, paged, label),
        reported(
          'disk per stored post',
          `${figure(bytesPerPost)} B (${figure(disk.tables / MIB)} MiB of tables and indexes / ${disk.posts.toLocaleString('en-US')})`,
        ),
      ],
      problems: [...searched.failures, ...paged.failures, ...(disk.posts === size ? [] : [`the archive holds ${disk.posts} posts, not ${size}`])],
      details: {
        through: reader.through,
        posts: disk.posts,
        seedSeconds,
        seedPostsPerSecond: size / seedSeconds,
        matches: Object.fromEntries(counter.counts),
        search: searched,
        deepPage: paged.timed,
        disk: { ...disk, bytesPerPost, databaseBytesPerPost: disk.database / disk.posts },
      },
    };
  } finally {
    await store?.close();
    await record?.stop();
    await postgres.stop();
  }
}

const GRPC_DEADLINE_MS = 10_000;
/** Posts made at once in the room while seeding: fast, without queueing hundreds of calls on one channel. */
const ROOM_PARALLEL = 25;
/** Agents of the room that make the PGlite row's posts. */
const ROOM_AGENTS = 20;

/**
 * The embedded default's record: PGlite in memory, in a record process of its own that follows a room
 * process of its own (in memory; the embedded product would run a second PGlite record beside it).
 * 100,000 posts made in that room; the record's RSS from ready (empty) to holding them; then the same
 * searches and deep pages over its gRPC API.
 */
export async function searchPGliteRow(_context: Context): Promise<Measurement> {
  const size = RECORD_SIZES.pglite;
  if (!recordServiceBuilt()) throw new Error('the record service is not built (services/record/dist/main.js): run npm run build');
  progress('  starting a room (in memory) and a record following it (PGlite in memory), each a process of its own…');
  const roomProcess = await startRoomProcess('room-for-pglite');
  let record: RecordProcess | undefined;
  const room = serviceClient(roomProto().RoomService, roomProcess.address, { deadlineMs: GRPC_DEADLINE_MS });
  try {
    record = await startRecordProcess('record-pglite', { ROOM_ADDR: roomProcess.address });
    const heldAtStart = await waitForQuiet(record.client);
    const rssStart = rssBytes(record.pid);
    progress(
      `  record (PGlite in memory) ready, holding ${heldAtStart.toLocaleString('en-US')} posts, RSS ${figure(rssStart / MIB)} MiB; making ${size.toLocaleString('en-US')} posts in the room…`,
    );
    const agents: string[] = [];
    for (let i = 0; i < ROOM_AGENTS; i += 1) {
      const { agent } = await room.call('upsertAgent', { agent: { agentName: `bench-record-${i}`, humanLabel: 'bench', scopes: ['posts:write'] } });
      if (!agent) throw new Error('UpsertAgent answered no agent');
      agents.push(agent.id);
    }
    const corpus = new Corpus(Date.now());
    const counter = new MatchCounter();
    const started = performance.now();
    // The room's ids of the posts made, by corpus index, so replies answer real posts.
    const ids: string[] = [];
    let failed = 0;
    for (let from = 0; from < size; from += ROOM_PARALLEL) {
      const batch = Array.from({ length: Math.min(ROOM_PARALLEL, size - from) }, async (_, offset) => {
        const index = from + offset;
        const post = corpus.at(index);
        counter.add(post);
        const replyIndex = post.replyTo === undefined ? undefined : corpus.indexOf(post.replyTo);
        // A reply to a post of this same batch is made as a post of its own: its parent may not exist yet.
        const replyTo = replyIndex !== undefined && replyIndex < from ? ids[replyIndex] : undefined;
        try {
          const created = await room.call('createPost', {
            agentId: agents[Number(post.agentId.slice(-4)) % ROOM_AGENTS],
            text: post.text,
            via: 'VIA_REST',
            callKey: randomUUID(),
            ...(replyTo === undefined ? {} : { replyTo }),
          });
          ids[index] = created.post?.id ?? '';
        } catch {
          failed += 1;
        }
      });
      await Promise.all(batch);
      if ((from + ROOM_PARALLEL) % 20_000 < ROOM_PARALLEL) {
        const status = await record.client.call('getRecordStatus', {});
        progress(
          `  ${(from + ROOM_PARALLEL).toLocaleString('en-US')} posts made; the record holds ${Number(status.posts).toLocaleString('en-US')}, RSS ${figure(rssBytes(record.pid) / MIB)} MiB`,
        );
      }
    }
    const madeSeconds = (performance.now() - started) / 1_000;
    const held = await waitForCount(record.client, heldAtStart + size - failed);
    const rssEnd = rssBytes(record.pid);
    const growth = rssEnd - rssStart;
    const archived = held - heldAtStart;
    progress(`  the record holds ${held.toLocaleString('en-US')} posts (${archived.toLocaleString('en-US')} new); RSS ${figure(rssEnd / MIB)} MiB`);
    progress(`  searching: ${TWO_WORD_QUERIES.length} two-word queries, by relevance and newest, ${SEARCH_ROUNDS} rounds, over gRPC…`);
    const reader = grpcReader(record.client, 'a record service process (services/record/dist/main.js, PGlite in memory) following a room process, over gRPC');
    const searched = await searches(reader);
    progress(`  paging: ${DEEP_PAGES} pages of ${PAGE_LIMIT} from cursors deep in the archive…`);
    const paged = await deepPages(reader, (index) => ids[index] ?? '', size);
    const label = `${size.toLocaleString('en-US')} posts, PGlite`;
    return {
      p50Ms: searched.all.p50Ms,
      p99Ms: searched.all.p99Ms,
      checks: [
        ...searchChecks(searched, paged, label),
        reported(
          `PGlite RSS growth at ${size.toLocaleString('en-US')} posts`,
          `${figure(growth / MIB)} MiB (${figure(rssStart / MIB)} → ${figure(rssEnd / MIB)} MiB; ${figure(growth / Math.max(1, archived))} B a post)`,
        ),
      ],
      problems: [
        ...searched.failures,
        ...paged.failures,
        ...(failed > 0 ? [`${failed} of ${size} posts were not made in the room`] : []),
        ...(archived >= size - failed ? [] : [`the record holds ${archived} of the ${size - failed} posts made`]),
        ...(record.exited() === undefined ? [] : [`record-pglite exited during the row (${record.exited()})`]),
      ],
      details: {
        through: reader.through,
        posts: held,
        madeSeconds,
        matches: Object.fromEntries(counter.counts),
        search: searched,
        deepPage: paged.timed,
        rssMiB: { start: rssStart / MIB, end: rssEnd / MIB, growth: growth / MIB },
        rssBytesPerPost: growth / Math.max(1, archived),
      },
    };
  } finally {
    room.close();
    await record?.stop();
    await roomProcess.stop();
  }
}

/** Waits until the record holds at least `posts` posts (at most two minutes), then until its count stops moving; answers it. */
async function waitForCount(client: RecordClient, posts: number): Promise<number> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline && Number((await client.call('getRecordStatus', {})).posts) < posts) await new Promise((resolve) => setTimeout(resolve, 250));
  return waitForQuiet(client);
}

/** Waits until the record's count of posts stops moving for two seconds; answers it. */
async function waitForQuiet(client: RecordClient): Promise<number> {
  let last = -1;
  let since = performance.now();
  for (;;) {
    const posts = Number((await client.call('getRecordStatus', {})).posts);
    if (posts !== last) {
      last = posts;
      since = performance.now();
    } else if (performance.now() - since > 2_000) return posts;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
