// The SSE row: one post delivered to 10,000 subscribers of GET /posts/stream on one edge process
// of the cluster, a few rounds; delivery latency (p99) and the edge's RSS against their targets.
import { type CpuSpent, startCpu, totalCpuMs } from './cpu.js';
import { fanout, openFilesLimit } from './fanout.js';
import { approvedToken } from '@agentroom/testkit';
import { progress } from './progress.js';
import { atMostCheck, type Context, type Measurement } from './row.js';
import { percentile } from './stats.js';

const SUBSCRIBERS = 10_000;
const ROUNDS = 5;
const TARGET = { p99Ms: 250, rssMiB: 400 } as const;
/** File descriptors the bench needs beyond one per subscriber (servers, Redis, pipes). */
const SPARE_FILES = 500;
const WHAT = `SSE fan-out to ${SUBSCRIBERS.toLocaleString('en-US')}`;

/** One post to SUBSCRIBERS subscribers of the cluster's edge, ROUNDS times after a warm-up round. */
export async function sseRow({ servers }: Context): Promise<Measurement> {
  const limit = openFilesLimit();
  if (SUBSCRIBERS + SPARE_FILES > limit) {
    throw new Error(
      `${SUBSCRIBERS.toLocaleString('en-US')} subscribers need more open files than the limit of ${limit}: raise it (ulimit -n ${SUBSCRIBERS + SPARE_FILES} or more) and run again`,
    );
  }
  const cluster = await servers.cluster();
  const edge = cluster.edges[0];
  if (edge === undefined || edge.metrics === '') throw new Error('the cluster did not say where its edge process and its metrics listen');
  const token = await approvedToken(cluster.origin, ['posts:write'], 'bench-fanout');
  progress(`  ${WHAT}: connecting to ${edge.url}, then a warm-up round and ${ROUNDS} measured…`);
  let cpu: { stop(): CpuSpent } | undefined;
  let cpuMs: CpuSpent = {};
  const result = await fanout({
    edgeOrigin: edge.url,
    edgeMetrics: edge.metrics,
    routerOrigin: cluster.origin,
    token,
    subscribers: SUBSCRIBERS,
    rounds: ROUNDS,
    progress,
    measuredRounds: { start: () => (cpu = startCpu(cluster.pids)), end: () => (cpuMs = cpu?.stop() ?? {}) },
  });

  const latencies = result.rounds.flatMap((round) => round.latencies).sort((a, b) => a - b);
  const missing = result.rounds.reduce((sum, round) => sum + round.missing, 0);
  const duplicates = result.rounds.at(-1)?.duplicates ?? 0;
  const rss = Math.max(result.rssMiB.connected, result.rssMiB.after);
  const p99 = percentile(latencies, 99);
  return {
    p50Ms: percentile(latencies, 50),
    p99Ms: p99,
    // Per delivery: every cluster process's CPU time over the measured rounds, shared by the posts' deliveries.
    cpuMsPerRequest: totalCpuMs(cpuMs) / Math.max(1, latencies.length),
    checks: [atMostCheck('delivery p99', p99, TARGET.p99Ms, 'ms'), atMostCheck('edge RSS', Math.round(rss), TARGET.rssMiB, 'MiB')],
    problems: [
      ...(missing > 0 ? [`${WHAT}: ${missing} deliveries missing`] : []),
      ...(duplicates > 0 ? [`${WHAT}: ${duplicates} events delivered twice`] : []),
    ],
    details: {
      subscribers: SUBSCRIBERS,
      rounds: result.rounds.map((round) => ({
        p50Ms: percentile(round.latencies, 50),
        p99Ms: percentile(round.latencies, 99),
        maxMs: round.latencies.at(-1),
        missing: round.missing,
      })),
      maxMs: latencies.at(-1),
      connectSeconds: result.connectSeconds,
      rssMiB: result.rssMiB,
      edgeFanoutMs: result.edgeFanoutMs,
      cpuMs,
      cpuPer: 'delivery',
    },
  };
}
