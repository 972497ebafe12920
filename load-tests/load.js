// Load: the expected traffic, held. The journeys mixed by weight (half of them readers) arrive at
// RATE iterations per second (default 20) for DURATION (default 5m), whatever the latency: this is
// the run the latency budgets are written for. Under 1% failed requests, over 99% passed checks.
import { duration, number } from './lib/env.js';
import { preflight } from './lib/preflight.js';
import { steady } from './lib/scenarios.js';
import { summarize } from './lib/summary.js';
import { thresholds, TREND_STATS } from './lib/thresholds.js';

export { mixed } from './lib/journeys.js';

const RATE = number('RATE', 20);

export const options = {
  scenarios: { load: steady({ exec: 'mixed', rate: RATE, duration: duration('DURATION', '5m'), maxVUs: number('MAX_VUS', Math.max(50, RATE * 5)) }) },
  thresholds: thresholds({ failedRate: 0.01, checksRate: 0.99 }),
  summaryTrendStats: TREND_STATS,
};

export function setup() {
  return preflight('load');
}

export function handleSummary(data) {
  return summarize('load', data);
}
