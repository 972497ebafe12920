// Soak: a moderate load for a long time, for what only time shows: memory that grows, Redis
// streams and idempotency keys that pile up, connections that leak, latency that creeps. RATE
// iterations per second (default 10) of the mix for DURATION (default 1h; 8h overnight), held to
// the same budgets as the load test. Compare the first and last minutes in the HTML report.
import { duration, number } from './lib/env.js';
import { preflight } from './lib/preflight.js';
import { steady } from './lib/scenarios.js';
import { summarize } from './lib/summary.js';
import { thresholds, TREND_STATS } from './lib/thresholds.js';

export { mixed } from './lib/journeys.js';

const RATE = number('RATE', 10);

export const options = {
  scenarios: { soak: steady({ exec: 'mixed', rate: RATE, duration: duration('DURATION', '1h'), maxVUs: number('MAX_VUS', Math.max(50, RATE * 5)) }) },
  thresholds: thresholds({ failedRate: 0.01, checksRate: 0.99 }),
  summaryTrendStats: TREND_STATS,
};

export function setup() {
  return preflight('soak');
}

export function handleSummary(data) {
  return summarize('soak', data);
}
