// The load: autocannon against one HTTP target as fast as it answers, with a warm-up thrown away,
// then the measured run; or a steady load at a fixed rate (steady.ts). The CPU time of the
// processes serving it is counted over the measured run.
import autocannon from 'autocannon';
import { type CpuSpent, startCpu, totalCpuMs } from './cpu.js';
import { progress } from './progress.js';
import { steadyLoad } from './steady.js';
import { type LoadTarget, type Outcome, requestSequence } from './target.js';

/** The same load for every target, so the figures compare. */
export const LOAD = { connections: 50, pipelining: 1, warmupSeconds: 3, measureSeconds: 10 } as const;

/** One measured run, and the CPU time the serving processes spent meanwhile. */
export interface LoadRun extends Outcome {
  /** The rate asked for, for a fixed-rate run. */
  offeredRate?: number;
  cpuMs: CpuSpent;
  cpuMsPerRequest: number;
  /** What makes the figures untrustworthy, in words; empty when the run was clean. */
  problems: string[];
}

/** Runs for a number of seconds, or until a number of responses. */
async function cannon(target: LoadTarget, until: { seconds: number } | { amount: number }): Promise<Outcome> {
  const expected = target.expectBody;
  const next = requestSequence(target);
  const setupRequest = (request: autocannon.Request): autocannon.Request => {
    const { path, headers } = next();
    return { ...request, headers, ...(path === undefined ? {} : { path }) };
  };
  const result = await autocannon({
    url: target.url,
    method: target.method ?? 'GET',
    headers: target.headers,
    body: target.body,
    connections: LOAD.connections,
    pipelining: LOAD.pipelining,
    ...('seconds' in until ? { duration: until.seconds } : { amount: until.amount }),
    // autocannon gathers each response body as a string.
    ...(expected ? { verifyBody: (body: string | Buffer | undefined) => expected.check(String(body ?? '')) } : {}),
    ...(target.paths || target.uniqueIdempotencyKey ? { requests: [{ setupRequest }] } : {}),
  });
  return {
    reqPerSec: result.requests.average,
    requests: result.requests.total,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    codes: Object.entries(result.statusCodeStats ?? {})
      .filter(([code]) => !code.startsWith('2'))
      .map(([code, stats]) => `${code} ×${stats.count ?? 0}`)
      .join(', '),
    errors: result.errors,
    timeouts: result.timeouts,
    mismatches: result.mismatches,
  };
}

/** What makes a run's figures untrustworthy, in words. */
function problemsOf(label: string, target: LoadTarget, outcome: Outcome): string[] {
  const problems: string[] = [];
  if (target.expectBody && outcome.mismatches > 0) problems.push(`${label}: ${outcome.mismatches} responses ${target.expectBody.description}`);
  if (outcome.non2xx > 0) {
    const hint = outcome.codes.includes('429') ? ' — 429 means the QUOTA_PER_ADDRESS override did not reach edge' : '';
    problems.push(`${label}: ${outcome.non2xx} non-2xx responses (${outcome.codes || 'codes unknown'})${hint}`);
  }
  if (outcome.errors > 0) problems.push(`${label}: ${outcome.errors} connection errors (${outcome.timeouts} of them timeouts)`);
  if (outcome.requests === 0) problems.push(`${label}: no request completed`);
  return problems;
}

/** `run` with the CPU time of `pids` counted around it. */
async function counted(label: string, target: LoadTarget, pids: Record<string, number>, run: () => Promise<Outcome>): Promise<LoadRun> {
  const cpu = startCpu(pids);
  const outcome = await run();
  const cpuMs = cpu.stop();
  return { ...outcome, cpuMs, cpuMsPerRequest: totalCpuMs(cpuMs) / Math.max(1, outcome.requests), problems: problemsOf(label, target, outcome) };
}

/** As fast as the target answers: a warm-up (JIT, connection pools, caches) thrown away, then the measured run. */
export async function measure(label: string, target: LoadTarget, pids: Record<string, number>): Promise<LoadRun> {
  progress(`  ${label}: warm-up ${LOAD.warmupSeconds} s, measuring ${LOAD.measureSeconds} s…`);
  await cannon(target, { seconds: LOAD.warmupSeconds });
  return counted(label, target, pids, () => cannon(target, { seconds: LOAD.measureSeconds }));
}

/** At a fixed rate, evenly spaced, over at most the same number of connections; right after `measure`, so no warm-up. */
export async function measureAtRate(label: string, target: LoadTarget, pids: Record<string, number>, rate: number): Promise<LoadRun> {
  progress(`  ${label}: ${Math.round(rate)} req/s, evenly spaced, for ${LOAD.measureSeconds} s…`);
  return { ...(await counted(label, target, pids, () => steadyLoad(target, rate, LOAD.measureSeconds, LOAD.connections))), offeredRate: rate };
}

/** `amount` requests as fast as the target answers, to bring a server to a state (keys held); timed, not counted. */
export async function fill(label: string, target: LoadTarget, amount: number): Promise<{ seconds: number; problems: string[] }> {
  progress(`  ${label}: ${amount.toLocaleString('en-US')} requests…`);
  const started = performance.now();
  const outcome = await cannon(target, { amount });
  const seconds = (performance.now() - started) / 1_000;
  progress(`  ${label}: done in ${seconds.toFixed(0)} s (${Math.round(outcome.requests / seconds).toLocaleString('en-US')} req/s)`);
  return { seconds, problems: problemsOf(label, target, outcome) };
}
