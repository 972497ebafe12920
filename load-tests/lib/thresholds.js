// The pass/fail criteria of a run, per journey: p95 and p99 of http_req_duration, the share of
// failed requests, the share of passed checks, and that the journey ran at all; and for the whole
// run, that no page of the room answered 200 broken (`broken_pages`, journeys.js). Each scenario file
// picks the strictness (a smoke test wants no failure at all, a spike tolerates some); the latency
// budgets live here, once, and LATENCY_SCALE stretches them for a slower machine.
import { LATENCY_SCALE } from './env.js';
import { JOURNEYS } from './journeys.js';

/**
 * p95 and p99 budgets in milliseconds at steady load, per journey. An MCP iteration is four POSTs
 * through the SDK's transport and the A2A one goes through the A2A SDK, so they get more room than
 * a REST call.
 */
export const LATENCY_MS = {
  read_room: { p95: 300, p99: 800 },
  share_post: { p95: 400, p99: 1000 },
  direct_messages: { p95: 400, p99: 1000 },
  mcp: { p95: 500, p99: 1200 },
  a2a: { p95: 500, p99: 1200 },
};

/** The statistics the summary and the report show for every trend (p99 is not in k6's default). */
export const TREND_STATS = ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)'];

function failedUnder(rate) {
  return rate === 0 ? 'rate==0' : `rate<${rate}`;
}

function checksOver(rate) {
  return rate === 1 ? 'rate==1' : `rate>${rate}`;
}

/**
 * Thresholds for one scenario.
 * - failedRate: the largest share of failed requests (http_req_failed) allowed; 0 allows none.
 * - checksRate: the smallest share of passed checks; 1 wants every one.
 * - latency: multiplies LATENCY_MS (on top of LATENCY_SCALE), for a scenario that expects slower answers.
 * - abort: stop the run as soon as a latency, failure or check threshold is crossed (k6's
 *   abortOnFail, after `abortDelay` so the first slow seconds of a warm-up do not end it).
 * - journeys: the journey tags the scenario runs.
 */
export function thresholds({ failedRate, checksRate, latency = 1, abort = false, abortDelay = '30s', journeys = JOURNEYS.map((j) => j.tag) }) {
  const rule = (expression) => (abort ? { threshold: expression, abortOnFail: true, delayAbortEval: abortDelay } : expression);
  const scale = latency * LATENCY_SCALE;
  const result = {
    http_req_failed: [rule(failedUnder(failedRate))],
    checks: [rule(checksOver(checksRate))],
    // A 200 page of the room that breaks a page rule is a bug at any load (journeys.js): none is
    // allowed, in every scenario. Judged at the end, so a breakpoint search still finds its rate.
    broken_pages: ['count==0'],
  };
  for (const journey of journeys) {
    const budget = LATENCY_MS[journey];
    result[`http_req_duration{journey:${journey}}`] = [rule(`p(95)<${Math.round(budget.p95 * scale)}`), rule(`p(99)<${Math.round(budget.p99 * scale)}`)];
    result[`http_req_failed{journey:${journey}}`] = [rule(failedUnder(failedRate))];
    result[`checks{journey:${journey}}`] = [rule(checksOver(checksRate))];
    // Never aborts: it can only be judged at the end, and it says a journey was left out.
    result[`http_reqs{journey:${journey}}`] = ['count>0'];
  }
  return result;
}
