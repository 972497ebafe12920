// `npm run bench -- idempotency`: the in-memory idempotency store (the embedded default's) as keys
// accumulate. Each POST with an Idempotency-Key claims a key (`begin`) and stores its answer
// (`complete`); the rate must not fall as the day's keys pile up.
import { MemoryIdempotencyStore } from '@agentroom/kit';

/** Keys held when the second round is measured: a busy day of writes. */
export const STORED_KEYS = 100_000;
const MEASURED = 20_000;

/** Claims and completes `count` new keys; answers keys per second. */
async function rate(store: MemoryIdempotencyStore, prefix: string, count: number): Promise<number> {
  const answer = { id: 'pst_0', text: 'hello' };
  const started = process.hrtime.bigint();
  for (let i = 0; i < count; i += 1) {
    const key = `${prefix}-${i}`;
    await store.begin(key, 'fingerprint');
    await store.complete(key, 'fingerprint', answer);
  }
  return count / (Number(process.hrtime.bigint() - started) / 1e9);
}

export interface IdempotencyResult {
  /** Median over the rounds, keys per second (each key: one begin and one complete). */
  emptyRate: number;
  fullRate: number;
  stored: number;
  /** fullRate / emptyRate: at least 0.9 is the target (no slower than 10 % below empty). */
  ratio: number;
}

const ROUNDS = 5;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

/** Rounds alternate between a new empty store and one holding STORED_KEYS keys; medians of each. */
export async function measureIdempotency(): Promise<IdempotencyResult> {
  // Warm the JIT on a store of its own, so the first measured round is not the slower one.
  await rate(new MemoryIdempotencyStore(), 'warm', MEASURED);
  const empties: number[] = [];
  const fulls: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    empties.push(await rate(new MemoryIdempotencyStore(), `empty-${round}`, MEASURED));
    const full = new MemoryIdempotencyStore();
    await rate(full, 'fill', STORED_KEYS);
    fulls.push(await rate(full, `full-${round}`, MEASURED));
  }
  const emptyRate = median(empties);
  const fullRate = median(fulls);
  return { emptyRate, fullRate, stored: STORED_KEYS, ratio: fullRate / emptyRate };
}
