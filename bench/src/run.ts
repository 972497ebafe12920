// `npm run bench [-- <key> ...]`: one table of rows, each a route of Agent Room (or a part of one)
// under load, beside two baselines measured in the same run (a bare node:http server and an empty
// Express 5 app answering the same bytes): req/s and its share of bare's, latency, CPU time per
// request summed over every process serving it, and each row's targets, met or not. The figures
// also go to bench/reports/bench-<time>.json with the machine they were measured on.
import { MENTIONS_MAX } from '@agentroom/kit/domain';
import { killServerChildrenNow } from './children.js';
import { HTTP_BENCHMARKS } from './http-rows.js';
import { idempotencyRow } from './idempotency.js';
import { LOAD } from './load.js';
import { memoryRow } from './memory-row.js';
import { mcpChangesRow } from './mcp-changes-row.js';
import { mentionRow } from './mention-row.js';
import { PAGE_SIZE, SEEDED_POSTS } from './pages.js';
import { recordClusterRow } from './record-cluster-row.js';
import { referenceRow } from './reference-row.js';
import { RECORD_SIZES, searchPGliteRow, searchPostgresRow } from './search-rows.js';
import { elapsedSeconds, progress } from './progress.js';
import { describeMachine, machine, writeReport } from './report.js';
import { type Benchmark, type Key, KEYS, type Row } from './row.js';
import { Servers } from './servers.js';
import { sseRow } from './sse-row.js';
import { formatTable } from './table.js';
import { TRACING_BENCHMARKS } from './tracing-rows.js';
import { WEBHOOKS, webhookRow } from './webhook-row.js';

/** Every row, in the order measured and printed: the baselines first, then embedded, then cluster. */
const BENCHMARKS: readonly Benchmark[] = [
  ...HTTP_BENCHMARKS,
  {
    id: 'idempotency-100k',
    key: 'idempotency',
    label: 'createPost at 100k stored idempotency keys vs empty, embedded',
    comparesToBare: false,
    run: idempotencyRow,
  },
  { id: 'sse-10k', key: 'sse', label: 'SSE: 1 post to 10,000 subscribers of one edge', comparesToBare: false, run: sseRow },
  {
    id: `mentions-${MENTIONS_MAX}`,
    key: 'mentions',
    label: `a post mentioning ${MENTIONS_MAX} agents, to each one's notification feed, cluster`,
    comparesToBare: false,
    run: mentionRow,
  },
  {
    id: 'mcp-changes',
    key: 'mcp-changes',
    label: 'MCP: a mention to resources/updated, 2026-07-28 listen and 2025-11-25 session, cluster',
    comparesToBare: false,
    run: mcpChangesRow,
  },
  {
    id: `webhooks-${MENTIONS_MAX}`,
    key: 'webhooks',
    label: `webhooks: posts naming ${MENTIONS_MAX} agents, each one's endpoint, cluster`,
    comparesToBare: false,
    run: webhookRow,
  },
  { id: 'memory-200k', key: 'memory', label: 'memory: 200,000 posts to the embedded default (record in DATA_DIR), RSS', comparesToBare: false, run: memoryRow },
  {
    id: 'search-postgres-1m',
    key: 'search',
    label: `record: search and deep pages, ${RECORD_SIZES.postgres.toLocaleString('en-US')} posts, PostgreSQL 15`,
    comparesToBare: false,
    run: searchPostgresRow,
  },
  {
    id: 'search-pglite-100k',
    key: 'search',
    label: `record: search and deep pages, ${RECORD_SIZES.pglite.toLocaleString('en-US')} posts, PGlite in memory`,
    comparesToBare: false,
    run: searchPGliteRow,
  },
  { id: 'record-cluster', key: 'record', label: 'record: lag at full create rate, catch-up, its CPU, cluster', comparesToBare: false, run: recordClusterRow },
  {
    id: 'reference-shown',
    key: 'reference',
    label: 'API reference: navigation to its first operation shown, chromium',
    comparesToBare: false,
    run: referenceRow,
  },
  ...TRACING_BENCHMARKS,
];

/** The benchmarks `argv` names by key (all for none), and the baselines if any of them needs bare's rate. */
function selected(argv: readonly string[]): Benchmark[] {
  const unknown = argv.filter((arg) => !(KEYS as readonly string[]).includes(arg));
  if (unknown.length > 0) throw new Error(`unknown benchmark ${unknown.join(', ')}: choose from ${KEYS.join(', ')} (or none for all)`);
  const keys = new Set<Key>(argv.length === 0 ? KEYS : (argv as Key[]));
  if (BENCHMARKS.some((benchmark) => keys.has(benchmark.key) && benchmark.comparesToBare)) keys.add('baseline');
  return BENCHMARKS.filter((benchmark) => keys.has(benchmark.key));
}

/** A row that could not be measured still has its line, saying so; the reason goes to the problems. */
function notMeasured(benchmark: Benchmark, error: unknown): Row {
  const reason = error instanceof Error ? error.message : String(error);
  return {
    id: benchmark.id,
    label: benchmark.label,
    checks: [{ target: 'measured', measured: 'NOT MEASURED', met: false }],
    problems: [`${benchmark.label}: not measured: ${reason}`],
    details: { error: reason },
  };
}

const NOTES = [
  "vs bare: the share of the bare node:http baseline's req/s, measured in this run. p50/p99: autocannon's, in whole ms (SSE: from sending the post to its bytes reaching each subscriber).",
  `load: autocannon, ${LOAD.connections} connections, pipelining ${LOAD.pipelining}, ${LOAD.warmupSeconds} s warm-up (discarded), then ${LOAD.measureSeconds} s measured; ½ rate: then ${LOAD.measureSeconds} s at half the measured req/s, evenly spaced (open loop: latency counts from when each request was due).`,
  `rows: ${SEEDED_POSTS.toLocaleString('en-US')} posts seeded in each mode; cursor: pages 2 to ${SEEDED_POSTS / PAGE_SIZE} in turn; MCP: tools/call without initialize, every answer checked; createPost: a real token and a fresh Idempotency-Key per request;`,
  '  idempotency: createPost with a new key per request on two embedded products of their own, one given 100,000 keys first, measured in turn, twice each; SSE: subscribers on the edge itself, the post through the router, 5 rounds after a warm-up, RSS from its /metrics.',
  '  The cluster logs a line per request (info, as deployed); the embedded product logs warnings only.',
  'CPU ms/req: user + system time of every process serving the row (/proc/<pid>/stat before and after the measured run), summed, per response.',
  '  cluster: launcher, room, record, messaging, delivery, auth, edge-1, router (Envoy on the rows behind it), redis-server and postgres (its postmaster); embedded, bare, Express: their one process. The load generator (and SSE subscribers) are not counted.',
  '  behind Envoy: the real Envoy (.venv/bin/envoy) in place of the router, with its coarse guard (1,000 req/s by default) lifted; its own access line per request is logged too.',
  '  SSE: per delivery, over the measured rounds. Mentions: one post naming 20 agents by id, 20 rounds after a warm-up, each agent on its own notification stream; per notification.',
  "  MCP changes: one agent's notifications URI, subscribed by a 2026-07-28 host (subscriptions/listen) and a 2025-11-25 host (its session's GET stream), a post mentioning it, 20 rounds after a warm-up; per mention.",
  `  Webhooks: ${WEBHOOKS.agents} agents with an endpoint each on a receiver in the bench (127.0.0.1, 204, every ${WEBHOOKS.verifyEvery}th delivery verified), posts naming all ${WEBHOOKS.agents} at a steady rate`,
  `  (${WEBHOOKS.offeredPerSecond} deliveries/s offered), ${WEBHOOKS.warmupSeconds} s warm-up, then ${WEBHOOKS.measureSeconds} s measured: deliveries/s arrived in the window; p50/p99 from when each post was due to each of its deliveries; per delivery.`,
  '  record: search, 8 two-word queries (common to rare words) by relevance and newest, 12 rounds, one gRPC SearchPosts at a time to a record process; deep pages: ListArchivedPosts from 400 cursors spread over the archive;',
  '  PostgreSQL 15 (fsync off) seeded through the record store in transactions of 5,000, then VACUUM ANALYZE; disk: tables and indexes / posts. PGlite: a record process (in memory) following a room process (in memory), 100,000 posts made there.',
  '  record, cluster: createPost at full rate, GetRecordStatus every 50 ms, lag = first poll holding a post − its creation; catch-up: the record SIGSTOPped, 20,000 posts made, SIGCONT; CPU: the record process per post archived.',
  '  API reference: chromium (headless) against the embedded product, a fresh context per load (nothing cached), the median of 5 loads from the navigation to the first frame',
  '  with the first operation laid out; p50 is /developers/reference (HTML), the interactive one (Scalar) is in the measured column, also with its bundle cached.',
  '  tracing: listPosts, MCP room_read_posts, then createPost over three clusters behind Envoy alike but for tracing (off; on at 10 % and 100 % of requests sampled, every process exporting',
  "  to the bench's OTLP/HTTP receiver, which keeps nothing), measured in turn for 3 rounds; each row the mean of its rounds, a traced row's cost against tracing off's.",
];

async function main(servers: Servers, benchmarks: Benchmark[]): Promise<string[]> {
  const startedAt = new Date().toISOString();
  const host = machine();
  progress(`${benchmarks.length} rows: ${benchmarks.map((benchmark) => benchmark.id).join(', ')}`);
  const rows: Row[] = [];
  const rateOf = (id: string): number | undefined => rows.find((row) => row.id === id)?.reqPerSec;
  for (const [i, benchmark] of benchmarks.entries()) {
    progress(`row ${i + 1}/${benchmarks.length}: ${benchmark.label}`);
    const row = await benchmark.run({ servers, rateOf }).then(
      (measured): Row => ({ id: benchmark.id, label: benchmark.label, ...measured }),
      (error: unknown) => notMeasured(benchmark, error),
    );
    rows.push(row);
    for (const check of row.checks) progress(`  ${check.target}: ${check.measured}${check.reportOnly ? '' : check.met ? ', met' : ', NOT MET'}`);
    for (const problem of row.problems) progress(`  problem: ${problem}`);
  }
  const problems = [...rows.flatMap((row) => row.problems), ...servers.exited()];

  console.log(`\nmeasured ${startedAt.slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(host)}\n`);
  console.log(formatTable(rows));
  console.log('');
  for (const note of NOTES) console.log(note);
  const file = writeReport({ startedAt, seconds: Math.round(elapsedSeconds()), machine: host, load: LOAD, rows, problems });
  console.log(`\nfigures as JSON: ${file} (run took ${Math.round(elapsedSeconds())} s)`);
  return problems;
}

// Whatever happens, no server is left behind: a signal, an exception, or a normal end.
process.on('exit', killServerChildrenNow);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killServerChildrenNow();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  });
}
const servers = new Servers();
try {
  const problems = await main(servers, selected(process.argv.slice(2)));
  if (problems.length > 0) {
    console.log('\nINVALID RUN — the figures above cannot be trusted:');
    for (const problem of problems) console.log(`  - ${problem}`);
    process.exitCode = 1;
  }
} catch (error) {
  console.error(`\nbench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
} finally {
  await servers.stop();
}
