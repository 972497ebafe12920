// The HTTP rows: the two baselines, then the product's routes under the same autocannon load, each
// compared with the bare node:http baseline's rate.
import { type ServerChild } from './children.js';
import { approvedToken } from '@agentroom/testkit';
import { type LoadRun, measure, measureAtRate } from './load.js';
import { mcpReadPosts } from './mcp.js';
import { cursorPaths, LIST_POSTS_PATH, page } from './pages.js';
import { atMostCheck, BARE_ID, type Benchmark, type Check, type Context, type Key, shareCheck } from './row.js';
import { type Servers } from './servers.js';
import { type LoadTarget } from './target.js';

interface HttpBenchmark {
  id: string;
  key: Key;
  label: string;
  /** The server under load, started on first use. */
  server(servers: Servers): Promise<ServerChild>;
  /** The request autocannon repeats; checked once by hand first. */
  target(server: ServerChild): Promise<LoadTarget>;
  /** Share of the bare baseline's req/s to reach. */
  shareOfBare?: number;
  /** Share of another row's req/s to reach. */
  shareOfRow?: { id: string; label: string; share: number };
  /** At most this much CPU time per request, summed over the processes serving it. */
  maxCpuMsPerRequest?: number;
  /** Then a run at half the measured rate, whose p99 must stay under this. */
  maxHalfRateP99Ms?: number;
}

/** A measured HTTP row: a warm-up, the measured run, and a run at half its rate when asked for. */
function http(spec: HttpBenchmark): Benchmark {
  return {
    id: spec.id,
    key: spec.key,
    label: spec.label,
    comparesToBare: spec.id !== BARE_ID,
    async run({ servers, rateOf }: Context) {
      const server = await spec.server(servers);
      const target = await spec.target(server);
      const full = await measure(spec.label, target, server.pids);
      let half: LoadRun | undefined;
      if (spec.maxHalfRateP99Ms !== undefined)
        half = await measureAtRate(`${spec.label} at half rate`, target, server.pids, Math.max(1, Math.round(full.reqPerSec / 2)));

      const checks: Check[] = [];
      if (spec.shareOfBare !== undefined) checks.push(shareCheck(full.reqPerSec, rateOf(BARE_ID), spec.shareOfBare, 'bare'));
      if (spec.shareOfRow) checks.push(shareCheck(full.reqPerSec, rateOf(spec.shareOfRow.id), spec.shareOfRow.share, spec.shareOfRow.label));
      if (spec.maxCpuMsPerRequest !== undefined) checks.push(atMostCheck('CPU', full.cpuMsPerRequest, spec.maxCpuMsPerRequest, 'ms/req'));
      if (half && spec.maxHalfRateP99Ms !== undefined)
        checks.push(atMostCheck('p99 at ½ rate', half.p99Ms, spec.maxHalfRateP99Ms, 'ms', ` at ${Math.round(half.reqPerSec).toLocaleString('en-US')} req/s`));
      return {
        reqPerSec: full.reqPerSec,
        p50Ms: full.p50Ms,
        p99Ms: full.p99Ms,
        cpuMsPerRequest: full.cpuMsPerRequest,
        checks,
        problems: [...full.problems, ...(half?.problems ?? [])],
        details: { url: target.url, method: target.method ?? 'GET', processes: Object.keys(server.pids), full, ...(half ? { halfRate: half } : {}) },
      };
    },
  };
}

/** The first page of posts: checked to hold a full page, then loaded as is. */
export async function firstPage(server: ServerChild): Promise<LoadTarget> {
  await page(server.origin);
  return { url: `${server.origin}${LIST_POSTS_PATH}` };
}

const CREATE_POST_PATH = '/api/v1/posts';

/** createPost as an approved agent: a real token, and a fresh Idempotency-Key on every request. */
export async function createPost(server: ServerChild): Promise<LoadTarget> {
  const token = await approvedToken(server.origin, ['posts:write'], `bench-${server.name}`);
  const url = `${server.origin}${CREATE_POST_PATH}`;
  const body = JSON.stringify({ text: 'A benchmark post: one of many, each with its own Idempotency-Key.' });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
  const response = await fetch(url, { method: 'POST', headers: { ...headers, 'idempotency-key': 'bench-check' }, body });
  if (response.status !== 201) throw new Error(`POST ${url} answered ${response.status}: ${(await response.text()).slice(0, 500)}`);
  return { url, method: 'POST', headers, body, uniqueIdempotencyKey: true };
}

/** MCP's first page, checked to answer the posts REST's first page answers on the same server. */
export async function mcpFirstPage(server: ServerChild): Promise<LoadTarget> {
  return mcpReadPosts(server, (await page(server.origin)).ids);
}

const LIST_EMBEDDED = 'list-embedded';

/** createPost in cluster mode, behind either front. */
const CREATE_TARGETS = { shareOfBare: 0.08, maxCpuMsPerRequest: 0.8, maxHalfRateP99Ms: 20 } as const;

export const HTTP_BENCHMARKS: readonly Benchmark[] = [
  http({ id: BARE_ID, key: 'baseline', label: 'bare node:http, same bytes as the first page', server: (s) => s.bare(), target: firstPage }),
  http({ id: 'express', key: 'baseline', label: 'empty Express 5 app, same bytes', server: (s) => s.express(), target: firstPage }),
  http({ id: LIST_EMBEDDED, key: 'list', label: 'listPosts first page, embedded', server: (s) => s.embedded(), target: firstPage, shareOfBare: 0.45 }),
  http({
    id: 'mcp-embedded',
    key: 'list',
    label: 'MCP room_read_posts first page, embedded',
    server: (s) => s.embedded(),
    target: mcpFirstPage,
    shareOfRow: { id: LIST_EMBEDDED, label: 'listPosts', share: 0.5 },
  }),
  http({
    id: 'cursor-embedded',
    key: 'cursor',
    label: 'listPosts with a cursor, pages 2 to 50, embedded',
    server: (s) => s.embedded(),
    // Pages 2 to 50 in turn: no page is asked twice in a row, as a reader paging back would not.
    target: async (server) => ({ url: `${server.origin}${LIST_POSTS_PATH}`, paths: await cursorPaths(server.origin) }),
    shareOfBare: 0.1,
  }),
  http({ id: 'list-cluster', key: 'list', label: 'listPosts first page, cluster', server: (s) => s.cluster(), target: firstPage, shareOfBare: 0.25 }),
  http({
    id: 'create-cluster',
    key: 'create',
    label: 'createPost, token + Idempotency-Key, cluster',
    server: (s) => s.cluster(),
    target: createPost,
    ...CREATE_TARGETS,
  }),
  // The same two rows behind the real Envoy instead of the Node router (Envoy's CPU counted), as deployed.
  http({
    id: 'list-cluster-envoy',
    key: 'list',
    label: 'listPosts first page, cluster behind Envoy',
    server: (s) => s.clusterBehindEnvoy(),
    target: firstPage,
    shareOfBare: 0.15,
  }),
  http({
    id: 'create-cluster-envoy',
    key: 'create',
    label: 'createPost, token + Idempotency-Key, cluster behind Envoy',
    server: (s) => s.clusterBehindEnvoy(),
    target: createPost,
    ...CREATE_TARGETS,
  }),
];
