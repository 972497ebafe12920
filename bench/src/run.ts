// `npm run bench`: each scenario measures a route of Agent Room against a bare node:http server
// answering the same bytes, with the same autocannon load, and prints both and their ratio. A
// scenario may also measure companions: other routes of the same product answering the same
// question (listPosts as the MCP tool room_read_posts), compared with its subject.
import { mkdirSync, writeFileSync } from 'node:fs';
import { arch, availableParallelism, cpus, platform, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { approvedToken } from './human.js';
import { BARE_ENV, killServerChildrenNow, SEEDED_POSTS, type ServerChild, startServerChild } from './children.js';
import { fanout, type FanoutResult, openFilesLimit, percentile } from './fanout.js';
import { measureIdempotency } from './idempotency.js';

/** The same load for every target, so the figures compare. */
const LOAD = { connections: 50, pipelining: 1, warmupSeconds: 3, measureSeconds: 10 } as const;
/** Starting the product and seeding 1,000 posts takes a few seconds; a hung child must not hang us. */
const READY_TIMEOUT_MS = 60_000;

/** One HTTP request that autocannon repeats. */
interface LoadTarget {
  label: string;
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /** Each request carries its own Idempotency-Key, so none is a replay. */
  uniqueIdempotencyKey?: boolean;
  /** A check of every response body (a 200 can still carry an error, as JSON-RPC does); failures count as mismatches. */
  expectBody?: { check(body: string): boolean; description: string };
}

/** One response, byte for byte, as the bare server must replay it. */
interface CapturedResponse {
  status: number;
  contentType: string;
  body: Buffer;
}

interface Context {
  /** The product in embedded mode, seeded with SEEDED_POSTS posts. */
  embedded: ServerChild;
  /** A bare node:http server (its own process) answering every request with `response`. */
  startBare(name: string, response: CapturedResponse): Promise<ServerChild>;
  /** `npm run cluster` (its own processes, Redis), started on first use. */
  startCluster(): Promise<ServerChild>;
}

/** Another route of the same product, measured in the same run and compared with the subject's req/s. */
interface Companion {
  target: LoadTarget;
  /** Its name in the ratio line. */
  name: string;
  /** The share of the subject's req/s it should reach. */
  targetRatio: number;
  /** What its response is, for the reader: size and content type. */
  note: string;
}

/** What a scenario loads: the product (subject) and a bare server (baseline), and any companions. */
interface Prepared {
  subject: LoadTarget;
  baseline: LoadTarget;
  /** What the response is, for the reader: size and content type. */
  note: string;
  companions?: Companion[];
}

/** A route to measure against a bare server that sends the same bytes. */
interface Scenario {
  /** What `npm run bench -- <key>` selects it by. */
  key: 'list' | 'create';
  /** Which server it loads: the embedded one is started only when a scenario needs it. */
  mode: 'embedded' | 'cluster';
  title: string;
  subjectName: string;
  /** The share of the baseline's req/s the subject should reach; 0 for "report only". */
  targetRatio: number;
  /** Also measure p99 at half the subject's top rate (the latency target). */
  halfRateP99?: boolean;
  prepare(context: Context): Promise<Prepared>;
}

// ---- scenarios ---------------------------------------------------------------------------------

const LIST_POSTS_PATH = '/api/v1/posts?limit=20';

/** The MCP protocol version the bench asks for in initialize; it then sends the one the server answers. */
const MCP_PROTOCOL_VERSION = '2025-06-18';
/** The share of REST listPosts' req/s that MCP room_read_posts should reach. */
const MCP_TARGET_RATIO = 0.5;

const listPosts: Scenario = {
  key: 'list',
  mode: 'embedded',
  title: `GET ${LIST_POSTS_PATH} (embedded mode, ${SEEDED_POSTS.toLocaleString('en-US')} posts in the room)`,
  subjectName: 'listPosts',
  targetRatio: 0.5,
  async prepare({ embedded, startBare }) {
    const url = `${embedded.origin}${LIST_POSTS_PATH}`;
    const response = await capture(url);
    if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${response.body.toString('utf8').slice(0, 500)}`);
    const page = JSON.parse(response.body.toString('utf8')) as { data?: unknown };
    const count = Array.isArray(page.data) ? page.data.length : -1;
    if (count !== 20) throw new Error(`GET ${url} answered ${count} posts, expected 20`);
    const mcp = await mcpReadPosts(embedded, postIds(page.data));
    const bare = await startBare('bare-posts', response);
    return {
      subject: { label: 'listPosts (embedded)', url },
      baseline: { label: 'bare node:http, same bytes', url: `${bare.origin}${LIST_POSTS_PATH}` },
      note: `${integer(response.body.length)} bytes, ${response.contentType}`,
      companions: [mcp],
    };
  },
};

function postIds(data: unknown): string[] {
  return Array.isArray(data) ? data.map((post) => String((post as { id?: unknown }).id)) : [];
}

/**
 * The same page of posts over MCP: a stateless tools/call of room_read_posts (limit 20) POSTed to
 * `{api_url}/mcp`, each request on its own (no initialize before it, as any stateless client may).
 * Checked once here to answer the posts REST answered, and during the load on every response.
 */
async function mcpReadPosts(embedded: ServerChild, restIds: string[]): Promise<Companion> {
  if (embedded.apiUrl === undefined) throw new Error('the embedded server did not announce its API_URL');
  const url = `${embedded.apiUrl}/mcp`;
  const rpc = async (body: string, headers: Record<string, string> = {}): Promise<{ response: CapturedResponse; json: McpAnswer }> => {
    const response = await capture(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body });
    const text = response.body.toString('utf8');
    if (response.status !== 200) throw new Error(`POST ${url} answered ${response.status}: ${text.slice(0, 500)}`);
    return { response, json: JSON.parse(text) as McpAnswer };
  };

  // Only to learn the protocol version the server speaks; the measured requests do not initialize.
  const init = await rpc(JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: MCP_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'agent-room-bench', version: '0.1.0' } } }));
  const version = init.json.result?.protocolVersion;
  if (typeof version !== 'string') throw new Error(`POST ${url} initialize answered no protocolVersion: ${JSON.stringify(init.json).slice(0, 500)}`);

  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': version };
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'room_read_posts', arguments: { limit: 20 } } });
  const { response, json } = await rpc(body, { 'mcp-protocol-version': version });
  const result = json.result;
  if (json.error !== undefined || result === undefined || result.isError === true || result.structuredContent?.object !== 'list') {
    throw new Error(`POST ${url} tools/call room_read_posts did not answer a list: ${response.body.toString('utf8').slice(0, 500)}`);
  }
  const ids = postIds(result.structuredContent.data);
  if (ids.length !== 20 || ids.join() !== restIds.join()) throw new Error(`POST ${url} room_read_posts answered ${ids.length} posts, not the 20 GET ${LIST_POSTS_PATH} answered`);

  return {
    target: {
      label: 'MCP room_read_posts (embedded)',
      url,
      method: 'POST',
      headers,
      body,
      // A failed JSON-RPC call is still a 200: check each answer is the tool's list, not an error.
      expectBody: {
        check: (text) => text.includes('"structuredContent":{"object":"list"') && !text.includes('"isError":true') && !text.includes('"error":{'),
        description: 'not a room_read_posts result with structuredContent.object "list"',
      },
    },
    name: 'MCP room_read_posts/listPosts',
    targetRatio: MCP_TARGET_RATIO,
    note: `tools/call room_read_posts {"limit":20} POSTed to ${url} (no initialize first, Mcp-Protocol-Version ${version}); answer ${integer(response.body.length)} bytes, ${response.status}, ${response.contentType}`,
  };
}

/** The parts of a JSON-RPC answer the bench looks at. */
interface McpAnswer {
  result?: { protocolVersion?: unknown; isError?: unknown; structuredContent?: { object?: unknown; data?: unknown } };
  error?: unknown;
}

const CREATE_POST_PATH = '/api/v1/posts';

/** createPost as an approved agent: a real token, and a fresh Idempotency-Key on every request. */
function createPost(mode: 'embedded' | 'cluster'): Scenario {
  return {
    key: 'create',
    mode,
    title: `POST ${CREATE_POST_PATH} with a token and an Idempotency-Key (${mode} mode)`,
    subjectName: `createPost (${mode})`,
    targetRatio: mode === 'cluster' ? 0.1 : 0,
    halfRateP99: mode === 'cluster',
    async prepare({ embedded, startCluster, startBare }) {
      const server = mode === 'embedded' ? embedded : await startCluster();
      const token = await approvedToken(server.origin, ['posts:write'], `bench-${mode}`);
      const url = `${server.origin}${CREATE_POST_PATH}`;
      const body = JSON.stringify({ text: 'A benchmark post: one of many, each with its own Idempotency-Key.' });
      const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
      const response = await capture(url, { method: 'POST', headers: { ...headers, 'idempotency-key': 'bench-capture' }, body });
      if (response.status !== 201) throw new Error(`POST ${url} answered ${response.status}: ${response.body.toString('utf8').slice(0, 500)}`);
      const bare = await startBare(`bare-created-${mode}`, response);
      return {
        subject: { label: `createPost (${mode})`, url, method: 'POST', headers, body, uniqueIdempotencyKey: true },
        baseline: { label: 'bare node:http, same bytes', url: `${bare.origin}${CREATE_POST_PATH}`, method: 'POST', headers, body },
        note: `${integer(response.body.length)} bytes, ${response.status}, ${response.contentType}`,
      };
    },
  };
}

const SCENARIOS: readonly Scenario[] = [listPosts, createPost('embedded'), createPost('cluster')];

/** SSE fan-out (issue 5): subscribers on one edge process, and the targets for 10,000 of them. */
const FANOUT = { sizes: [1_000, 10_000], rounds: 5, targetP99Ms: 250, targetRssMiB: 400, targetAt: 10_000 } as const;
/** File descriptors the bench needs beyond one per subscriber (servers, Redis, pipes). */
const SPARE_FILES = 500;

/** What `npm run bench -- <key> ...` can select; nothing selects all. */
const KEYS = ['list', 'create', 'sse', 'idempotency'] as const;
type Key = (typeof KEYS)[number];

function selected(argv: readonly string[]): Set<Key> {
  const unknown = argv.filter((arg) => !(KEYS as readonly string[]).includes(arg));
  if (unknown.length > 0) throw new Error(`unknown benchmark ${unknown.join(', ')}: choose from ${KEYS.join(', ')} (or none for all)`);
  return new Set(argv.length === 0 ? KEYS : (argv as Key[]));
}

// ---- measuring ---------------------------------------------------------------------------------

async function capture(url: string, init?: RequestInit): Promise<CapturedResponse> {
  const response = await fetch(url, init);
  return {
    status: response.status,
    contentType: response.headers.get('content-type') ?? 'application/octet-stream',
    body: Buffer.from(await response.arrayBuffer()),
  };
}

let keys = 0;

function cannon(target: LoadTarget, seconds: number, overallRate?: number): Promise<autocannon.Result> {
  const expected = target.expectBody;
  return autocannon({
    url: target.url,
    method: target.method ?? 'GET',
    headers: target.headers,
    body: target.body,
    connections: LOAD.connections,
    pipelining: LOAD.pipelining,
    duration: seconds,
    ...(overallRate === undefined ? {} : { overallRate }),
    // autocannon gathers each response body as a string.
    ...(expected ? { verifyBody: (body: string | Buffer | undefined) => expected.check(String(body ?? '')) } : {}),
    ...(target.uniqueIdempotencyKey
      ? { requests: [{ setupRequest: (request) => ({ ...request, headers: { ...request.headers, 'idempotency-key': `bench-${process.pid}-${(keys += 1)}` } }) }] }
      : {}),
  });
}

/** A warm-up run (JIT, connection pools, caches) that is thrown away, then the measured run. */
async function measure(target: LoadTarget): Promise<autocannon.Result> {
  process.stderr.write(`  ${target.label}: warm-up ${LOAD.warmupSeconds} s, measuring ${LOAD.measureSeconds} s…\n`);
  await cannon(target, LOAD.warmupSeconds);
  return cannon(target, LOAD.measureSeconds);
}

/** What makes a run's figures untrustworthy, in words; empty when the run was clean. */
function problemsOf(target: LoadTarget, result: autocannon.Result, label = target.label): string[] {
  const problems: string[] = [];
  if (target.expectBody && result.mismatches > 0) problems.push(`${label}: ${result.mismatches} responses ${target.expectBody.description}`);
  if (result.non2xx > 0) {
    const codes = Object.entries(result.statusCodeStats ?? {})
      .filter(([code]) => !code.startsWith('2'))
      .map(([code, stats]) => `${code} ×${stats.count ?? 0}`)
      .join(', ');
    const hint = codes.includes('429') ? ' — 429 means the QUOTA_PER_ADDRESS override did not reach edge' : '';
    problems.push(`${label}: ${result.non2xx} non-2xx responses (${codes || 'codes unknown'})${hint}`);
  }
  if (result.errors > 0) problems.push(`${label}: ${result.errors} connection errors (${result.timeouts} of them timeouts)`);
  if (result.requests.total === 0) problems.push(`${label}: no request completed`);
  return problems;
}

// ---- printing ----------------------------------------------------------------------------------

function integer(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

/** autocannon's latency histogram holds whole milliseconds. */
function ms(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(2);
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map((row) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ')).join('\n');
}

/**
 * Everything a run printed, as data: written to bench/reports/bench-<time>.json so runs can be
 * compared (the machine included: figures only compare on the same one).
 */
interface Measured {
  label: string;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
}
const report: { startedAt: string; machine: Record<string, unknown>; scenarios: Record<string, unknown>[]; idempotency?: Record<string, unknown>; fanout?: Record<string, unknown>[] } = {
  startedAt: new Date().toISOString(),
  machine: {},
  scenarios: [],
};

function measured(label: string, r: autocannon.Result): Measured {
  return { label, reqPerSec: r.requests.average, p50Ms: r.latency.p50, p99Ms: r.latency.p99, non2xx: r.non2xx, errors: r.errors };
}

function writeReport(): string {
  const dir = fileURLToPath(new URL('../reports/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `bench-${report.startedAt.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}

function printMachine(): void {
  const cpu = cpus()[0]?.model.trim() ?? 'unknown CPU';
  report.machine = { node: process.version, platform: platform(), arch: arch(), cpus: cpus().length, usable: availableParallelism(), cpu, memoryGiB: totalmem() / 2 ** 30, load: LOAD };
  console.log(`machine: node ${process.version}, ${platform()} ${arch()}, ${cpus().length} CPUs (${availableParallelism()} usable, ${cpu}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM`);
  console.log(
    `load:    autocannon, ${LOAD.connections} connections, pipelining ${LOAD.pipelining}, ${LOAD.warmupSeconds} s warm-up (discarded) then ${LOAD.measureSeconds} s measured (latency in whole ms); every server in its own process`,
  );
}

function printScenario(scenario: Scenario, prepared: Prepared, subject: autocannon.Result, baseline: autocannon.Result, companions: autocannon.Result[], halfRate?: autocannon.Result): void {
  const row = (label: string, r: autocannon.Result): string[] => [label, integer(r.requests.average), ms(r.latency.p50), ms(r.latency.p99), String(r.non2xx), String(r.errors)];
  const ratio = subject.requests.average / baseline.requests.average;
  const met = ratio >= scenario.targetRatio;
  report.scenarios.push({
    key: scenario.key,
    title: scenario.title,
    subject: measured(prepared.subject.label, subject),
    baseline: measured(prepared.baseline.label, baseline),
    companions: (prepared.companions ?? []).map((companion, i) => ({ ...measured(companion.target.label, companions[i]!), shareOfSubject: companions[i]!.requests.average / subject.requests.average, target: companion.targetRatio })),
    ratioToBare: ratio,
    target: scenario.targetRatio,
    met: scenario.targetRatio === 0 ? null : met,
    ...(halfRate ? { halfRate: measured('half rate', halfRate) } : {}),
  });
  console.log('');
  console.log(scenario.title);
  console.log(`  response: ${prepared.note}`);
  const header = ['target', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors'];
  const companionRows = (prepared.companions ?? []).map((companion, i) => row(companion.target.label, companions[i]!));
  console.log(table([header, row(prepared.subject.label, subject), ...companionRows, row(prepared.baseline.label, baseline)]).replace(/^/gm, '  '));
  const verdict = scenario.targetRatio === 0 ? 'no target' : `target >= ${scenario.targetRatio * 100} %: ${met ? 'MET' : 'NOT MET'}`;
  console.log(`  ratio ${scenario.subjectName}/bare: ${(ratio * 100).toFixed(1)} % of req/s — ${verdict}`);
  (prepared.companions ?? []).forEach((companion, i) => {
    const share = companions[i]!.requests.average / subject.requests.average;
    console.log(`  ${companion.target.label}: ${companion.note}`);
    console.log(`  ratio ${companion.name}: ${(share * 100).toFixed(1)} % of req/s — target >= ${companion.targetRatio * 100} % of ${scenario.subjectName}: ${share >= companion.targetRatio ? 'MET' : 'NOT MET'}`);
  });
  if (halfRate) {
    const rate = Math.round(subject.requests.average / 2);
    console.log(`  at half that rate (${integer(rate)} req/s offered): ${integer(halfRate.requests.average)} req/s, p50 ${ms(halfRate.latency.p50)} ms, p99 ${ms(halfRate.latency.p99)} ms — target p99 <= 20 ms: ${halfRate.latency.p99 <= 20 ? 'MET' : 'NOT MET'}`);
  }
}

/** Every latency of a size's measured rounds, sorted. */
function pooled(result: FanoutResult): number[] {
  return result.rounds.flatMap((round) => round.latencies).sort((a, b) => a - b);
}

function printFanout(results: FanoutResult[], skipped: string[]): void {
  console.log('');
  console.log(`SSE fan-out: N subscribers of GET /api/v1/posts/stream on one edge process (cluster mode, Redis), one post per round through the router`);
  console.log(`  latency: from sending POST /api/v1/posts until the event's bytes reach each subscriber (node:http sockets in one Node process on this machine, parsed by eventsource-parser); ${FANOUT.rounds} rounds after one warm-up round`);
  const header = ['subscribers', 'round', 'p50 ms', 'p99 ms', 'max ms', 'missing', 'duplicates'];
  const rows = [header];
  for (const result of results) {
    result.rounds.forEach((round, i) => {
      rows.push([integer(result.subscribers), String(i + 1), ms1(percentile(round.latencies, 50)), ms1(percentile(round.latencies, 99)), ms1(round.latencies.at(-1) ?? Number.NaN), String(round.missing), String(round.duplicates)]);
    });
    const all = pooled(result);
    rows.push([integer(result.subscribers), 'all', ms1(percentile(all, 50)), ms1(percentile(all, 99)), ms1(all.at(-1) ?? Number.NaN), String(result.rounds.reduce((sum, r) => sum + r.missing, 0)), String(result.rounds.at(-1)?.duplicates ?? 0)]);
  }
  console.log(table(rows).replace(/^/gm, '  '));
  for (const result of results) {
    const { idle, connected, after } = result.rssMiB;
    console.log(`  ${integer(result.subscribers)} subscribers: connected in ${result.connectSeconds.toFixed(1)} s; the edge writes a post to all of them in ${ms1(result.edgeFanoutMs)} ms (mean, its agentroom_live_fanout_seconds); edge RSS ${idle.toFixed(0)} MiB idle, ${connected.toFixed(0)} MiB connected, ${after.toFixed(0)} MiB after the rounds`);
    if (result.subscribers === FANOUT.targetAt) {
      const p99 = percentile(pooled(result), 99);
      const rss = Math.max(result.rssMiB.connected, result.rssMiB.after);
      console.log(`  targets at ${integer(FANOUT.targetAt)}: p99 <= ${FANOUT.targetP99Ms} ms: ${p99 <= FANOUT.targetP99Ms ? 'MET' : 'NOT MET'} (${ms1(p99)} ms); RSS <= ${FANOUT.targetRssMiB} MiB: ${rss <= FANOUT.targetRssMiB ? 'MET' : 'NOT MET'} (${rss.toFixed(0)} MiB)`);
    }
  }
  for (const line of skipped) console.log(`  NOT MEASURED: ${line}`);
}

function ms1(value: number): string {
  return value.toFixed(1);
}

// ---- main --------------------------------------------------------------------------------------

async function main(children: ServerChild[], keys: Set<Key>): Promise<string[]> {
  printMachine();
  const scenarios = SCENARIOS.filter((scenario) => keys.has(scenario.key));
  let embedded: ServerChild | undefined;
  if (scenarios.some((scenario) => scenario.mode === 'embedded')) {
    process.stderr.write(`starting the embedded server and seeding ${SEEDED_POSTS} posts…\n`);
    embedded = await startServerChild('embedded', './embedded-server.js', process.env, READY_TIMEOUT_MS);
    children.push(embedded);
  }

  let cluster: ServerChild | undefined;
  const context: Context = {
    get embedded(): ServerChild {
      if (!embedded) throw new Error('the embedded server was not started');
      return embedded;
    },
    async startCluster() {
      process.stderr.write('starting npm run cluster (room, auth, edge, router, redis-server)…\n');
      cluster ??= await startServerChild('cluster', './cluster-server.js', process.env, READY_TIMEOUT_MS);
      if (!children.includes(cluster)) children.push(cluster);
      return cluster;
    },
    async startBare(name, response) {
      const env = {
        ...process.env,
        [BARE_ENV.body]: response.body.toString('base64'),
        [BARE_ENV.contentType]: response.contentType,
        [BARE_ENV.status]: String(response.status),
      };
      const bare = await startServerChild(name, './bare-server.js', env, READY_TIMEOUT_MS);
      children.push(bare);
      // The baseline is only fair if it sends exactly what the product sent.
      const replay = await capture(bare.origin);
      if (!replay.body.equals(response.body) || replay.contentType !== response.contentType) throw new Error(`${name} does not replay the captured response`);
      return bare;
    },
  };

  const problems: string[] = [];
  for (const scenario of scenarios) {
    process.stderr.write(`\n${scenario.title}\n`);
    const prepared = await scenario.prepare(context);
    const subject = await measure(prepared.subject);
    // Companions right after the subject: the same product process, data and load.
    const companions: autocannon.Result[] = [];
    for (const companion of prepared.companions ?? []) companions.push(await measure(companion.target));
    const baseline = await measure(prepared.baseline);
    const halfRate = scenario.halfRateP99 ? await cannon(prepared.subject, LOAD.measureSeconds, Math.max(1, Math.round(subject.requests.average / 2))) : undefined;
    problems.push(...problemsOf(prepared.subject, subject), ...problemsOf(prepared.baseline, baseline));
    (prepared.companions ?? []).forEach((companion, i) => problems.push(...problemsOf(companion.target, companions[i]!)));
    if (halfRate) problems.push(...problemsOf(prepared.subject, halfRate, `${prepared.subject.label} at half rate`));
    for (const child of children) {
      const exited = child.exited();
      if (exited !== undefined) problems.push(`${child.name} exited during the run (${exited})`);
    }
    printScenario(scenario, prepared, subject, baseline, companions, halfRate);
  }

  if (keys.has('idempotency')) {
    const result = await measureIdempotency();
    const micros = (perSecond: number): number => 1e6 / perSecond;
    const extra = micros(result.fullRate) - micros(result.emptyRate);
    report.idempotency = { ...result, extraMicrosPerKey: extra };
    console.log('Idempotency store (memory): begin + complete of new keys, empty vs holding a busy day of keys');
    console.log(`  median of 5 rounds: empty ${integer(Math.round(result.emptyRate))} keys/s (${micros(result.emptyRate).toFixed(2)} µs a key); holding ${integer(result.stored)} keys: ${integer(Math.round(result.fullRate))} keys/s (${micros(result.fullRate).toFixed(2)} µs a key)`);
    // What createPost feels: one key per request. The sweep used to visit every key (measured with
    // this bench: 8,290 keys/s empty, 583 at 100,000 keys, 1.7 ms a key); what is left is a larger
    // Map's memory traffic, a microsecond or so, against a createPost's milliseconds (the create scenario).
    console.log(`  extra time a createPost spends in the store at ${integer(result.stored)} keys: ${extra.toFixed(2)} µs`);
  }

  if (keys.has('sse')) {
    const server = await context.startCluster();
    const edge = server.edges[0];
    if (edge === undefined || edge.metrics === '') throw new Error('the cluster did not say where its edge process and its metrics listen');
    const token = await approvedToken(server.origin, ['posts:write'], 'bench-fanout');
    const limit = openFilesLimit();
    const results: FanoutResult[] = [];
    const skipped: string[] = [];
    for (const size of FANOUT.sizes) {
      if (size + SPARE_FILES > limit) {
        skipped.push(`${integer(size)} subscribers: the open files limit is ${limit}; raise it (ulimit -n ${size + SPARE_FILES} or more) and run again`);
        continue;
      }
      process.stderr.write(`\nSSE fan-out: ${integer(size)} subscribers on ${edge.url}, ${FANOUT.rounds} rounds\n`);
      const result = await fanout({ edgeOrigin: edge.url, edgeMetrics: edge.metrics, routerOrigin: server.origin, token, subscribers: size, rounds: FANOUT.rounds, progress: (line) => process.stderr.write(`${line}\n`) });
      results.push(result);
      const missing = result.rounds.reduce((sum, round) => sum + round.missing, 0);
      const duplicates = result.rounds.at(-1)?.duplicates ?? 0;
      if (missing > 0) problems.push(`SSE fan-out to ${integer(size)}: ${missing} deliveries missing`);
      if (duplicates > 0) problems.push(`SSE fan-out to ${integer(size)}: ${duplicates} events delivered twice`);
    }
    for (const child of children) {
      const exited = child.exited();
      if (exited !== undefined) problems.push(`${child.name} exited during the run (${exited})`);
    }
    report.fanout = results.map((result) => ({ subscribers: result.subscribers, p50Ms: percentile(pooled(result), 50), p99Ms: percentile(pooled(result), 99), maxMs: pooled(result).at(-1), missing: result.rounds.reduce((sum, r) => sum + r.missing, 0), rssMiB: result.rssMiB, edgeFanoutMs: result.edgeFanoutMs }));
    printFanout(results, skipped);
  }
  return problems;
}

const children: ServerChild[] = [];
// Whatever happens, no server is left behind: a signal, an exception, or a normal end.
process.on('exit', killServerChildrenNow);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killServerChildrenNow();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  });
}
try {
  const problems = await main(children, selected(process.argv.slice(2)));
  console.log(`\nfigures as JSON: ${writeReport()}`);
  if (problems.length > 0) {
    console.log('\nINVALID RUN — the figures above cannot be trusted:');
    for (const problem of problems) console.log(`  - ${problem}`);
    process.exitCode = 1;
  }
} catch (error) {
  console.error(`\nbench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
} finally {
  await Promise.all(children.map((child) => child.stop()));
}
