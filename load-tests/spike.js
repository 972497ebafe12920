// Spike: a sudden surge, as when a link to the room goes round. BASE_RATE iterations per second
// (default 5) for 30 s, up to SPIKE_RATE (default 100) within 10 s, held for SPIKE_HOLD (default
// 1m), back down within 10 s, then a minute at BASE_RATE to see the target recover. During a surge
// some slowness and a few failures are acceptable: up to 5% failed, latency budgets tripled.
import { duration, number } from './lib/env.js';
import { preflight } from './lib/preflight.js';
import { ramping } from './lib/scenarios.js';
import { summarize } from './lib/summary.js';
import { thresholds, TREND_STATS } from './lib/thresholds.js';

export { mixed } from './lib/journeys.js';

const BASE = number('BASE_RATE', 5);
const PEAK = number('SPIKE_RATE', 100);

export const options = {
  scenarios: {
    spike: ramping({
      exec: 'mixed',
      startRate: BASE,
      stages: [
        { target: BASE, duration: '30s' },
        { target: PEAK, duration: '10s' },
        { target: PEAK, duration: duration('SPIKE_HOLD', '1m') },
        { target: BASE, duration: '10s' },
        { target: BASE, duration: '1m' },
      ],
      maxVUs: number('MAX_VUS', Math.max(100, PEAK * 5)),
    }),
  },
  thresholds: thresholds({ failedRate: 0.05, checksRate: 0.95, latency: 3 }),
  summaryTrendStats: TREND_STATS,
};

export function setup() {
  return preflight('spike');
}

export function handleSummary(data) {
  return summarize('spike', data);
}
