// createPost as idempotency keys pile up: every POST with an Idempotency-Key leaves its key in the
// store for a day, so by evening the embedded default's in-memory store holds a day's writes. The
// rate must not fall as they accumulate. Two embedded products of their own, seeded alike: one is
// given 100,000 POSTs with new keys first; then createPost is measured on each in turn, twice, so
// a machine that speeds up or slows down during the row weighs on both sides alike.
import { createPost } from './http-rows.js';
import { fill, type LoadRun, measure } from './load.js';
import { type Context, type Measurement, shareCheck } from './row.js';

/** Keys the full server holds beyond the other: a busy day of writes. */
const STORED_KEYS = 100_000;
/** Measured runs on each server, alternating. */
const ROUNDS = 2;
/** The rate holding them must stay within 10 % of the rate without. */
const TARGET_SHARE = 0.9;

const mean = (runs: LoadRun[], of: (run: LoadRun) => number): number => runs.reduce((sum, run) => sum + of(run), 0) / runs.length;

export async function idempotencyRow({ servers }: Context): Promise<Measurement> {
  const [emptyServer, fullServer] = await Promise.all([servers.embeddedOfItsOwn('embedded-keys-empty'), servers.embeddedOfItsOwn('embedded-keys-full')]);
  try {
    const emptyTarget = await createPost(emptyServer);
    const fullTarget = await createPost(fullServer);
    const filled = await fill(`createPost: storing ${STORED_KEYS.toLocaleString('en-US')} keys on one server`, fullTarget, STORED_KEYS);
    const empty: LoadRun[] = [];
    const full: LoadRun[] = [];
    for (let round = 1; round <= ROUNDS; round += 1) {
      empty.push(await measure(`createPost, embedded, fewer keys (round ${round} of ${ROUNDS})`, emptyTarget, emptyServer.pids));
      full.push(
        await measure(`createPost, embedded, ${STORED_KEYS.toLocaleString('en-US')} keys more (round ${round} of ${ROUNDS})`, fullTarget, fullServer.pids),
      );
    }
    const emptyRate = mean(empty, (run) => run.reqPerSec);
    const fullRate = mean(full, (run) => run.reqPerSec);
    const check = shareCheck(fullRate, emptyRate, TARGET_SHARE, 'empty');
    return {
      reqPerSec: fullRate,
      p50Ms: mean(full, (run) => run.p50Ms),
      p99Ms: mean(full, (run) => run.p99Ms),
      cpuMsPerRequest: mean(full, (run) => run.cpuMsPerRequest),
      checks: [
        { ...check, measured: `${check.measured} (${Math.round(fullRate).toLocaleString('en-US')} vs ${Math.round(emptyRate).toLocaleString('en-US')} req/s)` },
      ],
      problems: [...filled.problems, ...empty.flatMap((run) => run.problems), ...full.flatMap((run) => run.problems)],
      details: {
        url: emptyTarget.url,
        extraKeys: STORED_KEYS,
        fillSeconds: filled.seconds,
        emptyCpuMsPerRequest: mean(empty, (run) => run.cpuMsPerRequest),
        empty,
        full,
      },
    };
  } finally {
    // Neither is needed again: their memory and idle timers stay out of the rows after this one.
    await Promise.all([emptyServer.stop(), fullServer.stop()]);
  }
}
