// createPost as idempotency keys pile up: every POST with an Idempotency-Key leaves its key in the
// store for a day, so by evening the embedded default's in-memory store holds a day's writes. The
// rate must not fall as they accumulate: createPost on the embedded product is measured with the
// store (nearly) empty, then again once 100,000 more keys are held, on the same server.
import { createPost } from './http-rows.js';
import { fill, LOAD, measure } from './load.js';
import { type Context, type Measurement, shareCheck } from './row.js';

/** Keys added between the two runs: a busy day of writes. */
const STORED_KEYS = 100_000;
/** The rate holding them must stay within 10 % of the rate before. */
const TARGET_SHARE = 0.9;
const LABEL = 'createPost, embedded';

export async function idempotencyRow({ servers }: Context): Promise<Measurement> {
  const server = await servers.embedded();
  const target = await createPost(server);
  const empty = await measure(`${LABEL}, store empty`, target, server.pids);
  const filled = await fill(`${LABEL}: storing ${STORED_KEYS.toLocaleString('en-US')} more keys`, target, STORED_KEYS);
  const full = await measure(`${LABEL}, ${STORED_KEYS.toLocaleString('en-US')} keys more`, target, server.pids);
  // Keys held when the second run started: those of the first run (and its warm-up) and the fill.
  const held = empty.requests + STORED_KEYS;
  const check = shareCheck(full.reqPerSec, empty.reqPerSec, TARGET_SHARE, 'empty');
  return {
    reqPerSec: full.reqPerSec,
    p50Ms: full.p50Ms,
    p99Ms: full.p99Ms,
    cpuMsPerRequest: full.cpuMsPerRequest,
    checks: [{ ...check, measured: `${check.measured} (${Math.round(full.reqPerSec).toLocaleString('en-US')} vs ${Math.round(empty.reqPerSec).toLocaleString('en-US')} req/s)` }],
    problems: [...empty.problems, ...filled.problems, ...full.problems],
    details: { url: target.url, keysHeldAtLeast: held, fillSeconds: filled.seconds, measureSeconds: LOAD.measureSeconds, empty, full },
  };
}
