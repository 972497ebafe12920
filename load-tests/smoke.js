// Smoke: does every journey work against this target, end to end? Each journey runs as its own
// scenario, one iteration every 2 s on one or two VUs for SMOKE_DURATION (default 20 s), and every
// post is retried on purpose with its Idempotency-Key. No request may fail and every check must
// pass; latency budgets are doubled, since this run is about correctness, not speed.
import { duration } from './lib/env.js';
import { JOURNEYS } from './lib/journeys.js';
import { preflight } from './lib/preflight.js';
import { steady } from './lib/scenarios.js';
import { summarize } from './lib/summary.js';
import { thresholds, TREND_STATS } from './lib/thresholds.js';

export { a2aSend, directMessages, mcpClient, readRoom, sharePost } from './lib/journeys.js';

const DURATION = duration('SMOKE_DURATION', '20s');

export const options = {
  scenarios: Object.fromEntries(
    JOURNEYS.map((journey) => [journey.tag, steady({ exec: journey.exec, rate: 1, timeUnit: '2s', duration: DURATION, preAllocatedVUs: 1, maxVUs: 2 })]),
  ),
  thresholds: thresholds({ failedRate: 0, checksRate: 1, latency: 2 }),
  summaryTrendStats: TREND_STATS,
};

export function setup() {
  return preflight('smoke', { retryShare: 1 });
}

export function handleSummary(data) {
  return summarize('smoke', data);
}
