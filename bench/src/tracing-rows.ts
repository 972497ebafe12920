// What tracing costs (docs/decisions.md §50): listPosts, MCP room_read_posts and createPost over the
// cluster behind Envoy, on three clusters alike but for tracing (off, 10 % and 100 % of requests
// sampled, spans to the bench's OTLP receiver), measured in turn, round after round, so that a
// machine whose load drifts weighs on each alike; each row is one setting's mean over the rounds,
// and a traced row states its rate and CPU time per request against tracing off's.
import { z } from 'zod';
import { type ServerChild } from './children.js';
import { createPost, firstPage, mcpFirstPage } from './http-rows.js';
import { type LoadRun, measure } from './load.js';
import { progress } from './progress.js';
import { type Benchmark, type Check, figure, type Measurement, percent, reported } from './row.js';
import { type Servers } from './servers.js';
import { type LoadTarget } from './target.js';

/** Rounds of the three settings, one after another. */
const ROUNDS = 3;
/** The sampled share of each setting; 0 is tracing off (no OTEL_* variable at all). */
const SETTINGS = [0, 0.1, 1] as const;
type Setting = (typeof SETTINGS)[number];

const receiverStats = z.object({ exports: z.number(), bytes: z.number(), byAgent: z.record(z.string(), z.number()) });
type ReceiverStats = z.infer<typeof receiverStats>;

async function statsOf(receiver: ServerChild): Promise<ReceiverStats> {
  return receiverStats.parse(await (await fetch(`${receiver.origin}/stats`)).json());
}

function since(after: ReceiverStats, before: ReceiverStats): ReceiverStats {
  const byAgent = Object.fromEntries(
    Object.entries(after.byAgent)
      .map(([agent, count]) => [agent, count - (before.byAgent[agent] ?? 0)] as const)
      .filter(([, count]) => count > 0),
  );
  return { exports: after.exports - before.exports, bytes: after.bytes - before.bytes, byAgent };
}

function server(servers: Servers, setting: Setting): Promise<ServerChild> {
  return setting === 0 ? servers.clusterBehindEnvoy() : servers.clusterBehindEnvoyTraced(setting);
}

function name(setting: Setting): string {
  return setting === 0 ? 'tracing off' : `tracing ${setting * 100} %`;
}

interface Operation {
  key: string;
  label: string;
  target(server: ServerChild): Promise<LoadTarget>;
}

/** Reads before writes: createPost's posts would change the pages the reads check. */
const OPERATIONS: readonly Operation[] = [
  { key: 'list', label: 'listPosts first page', target: firstPage },
  { key: 'mcp', label: 'MCP room_read_posts first page', target: mcpFirstPage },
  { key: 'create', label: 'createPost', target: createPost },
];

interface Series {
  runs: Map<Setting, LoadRun[]>;
  /** Exports the receiver got while each setting's runs went on. */
  received: Map<Setting, ReceiverStats>;
}

/** Every setting of one operation, in turn, ROUNDS times; measured once, for its three rows. */
const series = new Map<string, Promise<Series>>();

function measureSeries(servers: Servers, operation: Operation): Promise<Series> {
  let measured = series.get(operation.key);
  if (measured === undefined) {
    measured = (async () => {
      const targets = new Map<Setting, { server: ServerChild; target: LoadTarget }>();
      for (const setting of SETTINGS) {
        const cluster = await server(servers, setting);
        targets.set(setting, { server: cluster, target: await operation.target(cluster) });
      }
      const runs = new Map<Setting, LoadRun[]>(SETTINGS.map((setting) => [setting, []]));
      const received = new Map<Setting, ReceiverStats>(SETTINGS.map((setting) => [setting, { exports: 0, bytes: 0, byAgent: {} }]));
      for (let round = 1; round <= ROUNDS; round += 1) {
        for (const setting of SETTINGS) {
          const { server: cluster, target } = targets.get(setting)!;
          progress(`  ${operation.label}, ${name(setting)}: round ${round} of ${ROUNDS}`);
          // Tracing off has no receiver: its processes were started without any OTEL_* variable.
          const receiver = setting === 0 ? undefined : await servers.otlpReceiver(setting);
          const before = receiver && (await statsOf(receiver));
          runs.get(setting)!.push(await measure(`${operation.label}, ${name(setting)}`, target, cluster.pids));
          if (receiver === undefined || before === undefined) continue;
          const got = since(await statsOf(receiver), before);
          const sum = received.get(setting)!;
          sum.exports += got.exports;
          sum.bytes += got.bytes;
          for (const [agent, count] of Object.entries(got.byAgent)) sum.byAgent[agent] = (sum.byAgent[agent] ?? 0) + count;
        }
      }
      return { runs, received };
    })();
    series.set(operation.key, measured);
  }
  return measured;
}

const mean = (values: number[]): number => values.reduce((sum, value) => sum + value, 0) / values.length;

function change(value: number, base: number): string {
  if (!Number.isFinite(value) || !Number.isFinite(base) || base === 0) return 'n/a';
  return `${value >= base ? '+' : '−'}${percent(Math.abs(value / base - 1))}`;
}

function row(operation: Operation, setting: Setting): Benchmark {
  return {
    id: `tracing-${operation.key}-${setting === 0 ? 'off' : setting * 100}`,
    key: 'tracing',
    label: `${operation.label}, cluster behind Envoy, ${name(setting)}`,
    comparesToBare: false,
    async run({ servers }): Promise<Measurement> {
      const { runs, received } = await measureSeries(servers, operation);
      const mine = runs.get(setting)!;
      const off = runs.get(0)!;
      const reqPerSec = mean(mine.map((run) => run.reqPerSec));
      const cpuMsPerRequest = mean(mine.map((run) => run.cpuMsPerRequest));
      const checks: Check[] = [reported(`req/s, each of ${ROUNDS} rounds`, mine.map((run) => Math.round(run.reqPerSec).toLocaleString('en-US')).join(', '))];
      const problems = mine.flatMap((run) => run.problems);
      const spans = received.get(setting)!;
      if (setting !== 0) {
        const offRate = mean(off.map((run) => run.reqPerSec));
        const offCpu = mean(off.map((run) => run.cpuMsPerRequest));
        checks.push(reported('req/s vs tracing off', change(reqPerSec, offRate)));
        checks.push(reported('CPU vs tracing off', `${change(cpuMsPerRequest, offCpu)} (${figure(offCpu)} → ${figure(cpuMsPerRequest)} ms/req)`));
        const requests = mine.reduce((sum, run) => sum + run.requests, 0);
        checks.push(reported('spans sent', `${spans.exports} exports, ${figure(spans.bytes / Math.max(1, requests))} B/req`));
        // Spans that never left would make tracing look free: Envoy and the services must both have exported.
        if (spans.exports === 0) problems.push(`${operation.label}, ${name(setting)}: no span reached the OTLP receiver`);
        else if (Object.keys(spans.byAgent).length < 2)
          problems.push(`${operation.label}, ${name(setting)}: only ${Object.keys(spans.byAgent).join(', ')} exported (Envoy and the services both should)`);
      }
      return {
        reqPerSec,
        p50Ms: mean(mine.map((run) => run.p50Ms)),
        p99Ms: mean(mine.map((run) => run.p99Ms)),
        cpuMsPerRequest,
        checks,
        problems,
        details: { setting: name(setting), rounds: mine, otlpReceived: spans },
      };
    },
  };
}

export const TRACING_BENCHMARKS: readonly Benchmark[] = OPERATIONS.flatMap((operation) => SETTINGS.map((setting) => row(operation, setting)));
