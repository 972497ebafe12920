// Breakpoint: how much can the target take? The mix arrives at START_RATE iterations per second
// (default 5), rising steadily to MAX_RATE (default 500) over RAMP (default 10m), and the run stops
// as soon as a load-test threshold breaks (abortOnFail, judged after 30 s of warm-up). A breached
// threshold is the expected end here (k6 exits 99): the summary names it and prints the arrival
// rate asked at that moment, the breaking point. If the run reaches MAX_RATE, raise it.
import exec from 'k6/execution';
import { Gauge } from 'k6/metrics';
import { duration, number } from './lib/env.js';
import { mixed } from './lib/journeys.js';
import { preflight } from './lib/preflight.js';
import { ramping, rateAt } from './lib/scenarios.js';
import { summarize } from './lib/summary.js';
import { thresholds, TREND_STATS } from './lib/thresholds.js';

const MAX = number('MAX_RATE', 500);

/** Kept apart from `options`, which k6 replaces with its own consolidated copy inside a VU. */
const PLAN = ramping({
  exec: 'breakpoint',
  startRate: number('START_RATE', 5),
  stages: [{ target: MAX, duration: duration('RAMP', '10m') }],
  maxVUs: number('MAX_VUS', Math.max(200, MAX * 4)),
});

export const options = {
  scenarios: { breakpoint: PLAN },
  thresholds: thresholds({ failedRate: 0.01, checksRate: 0.99, abort: true }),
  summaryTrendStats: TREND_STATS,
};

/** The arrival rate the ramp asks for now: its last value is the rate at which the run stopped. */
const targetRate = new Gauge('target_rate');

export function breakpoint(data) {
  targetRate.add(rateAt(PLAN, (Date.now() - exec.scenario.startTime) / 1000));
  mixed(data);
}

export function setup() {
  return preflight('breakpoint');
}

export function handleSummary(data) {
  return summarize('breakpoint', data);
}
