// The in-memory idempotency store (the embedded default's) as keys accumulate. Each POST with an
// Idempotency-Key claims a key (`begin`) and stores its answer (`complete`); the rate must not
// fall as the day's keys pile up. Measured in this process: the store alone, no HTTP.
import { MemoryIdempotencyStore } from '@agentroom/kit';
import { type CpuSpent, startOwnCpu, totalCpuMs } from './cpu.js';
import { progress } from './progress.js';
import { type Measurement, shareCheck } from './row.js';

/** Keys held when the second round is measured: a busy day of writes. */
const STORED_KEYS = 100_000;
const MEASURED = 20_000;
const ROUNDS = 5;
/** The rate at STORED_KEYS keys must stay within 10 % of the empty store's. */
const TARGET_SHARE = 0.9;

interface Round {
  keysPerSecond: number;
  cpuMsPerKey: number;
}

/** Claims and completes `count` new keys. */
async function round(store: MemoryIdempotencyStore, prefix: string, count: number): Promise<Round> {
  const answer = { id: 'pst_0', text: 'hello' };
  const cpu = startOwnCpu();
  const started = process.hrtime.bigint();
  for (let i = 0; i < count; i += 1) {
    const key = `${prefix}-${i}`;
    await store.begin(key, 'fingerprint');
    await store.complete(key, 'fingerprint', answer);
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const spent: CpuSpent = cpu.stop();
  return { keysPerSecond: count / seconds, cpuMsPerKey: totalCpuMs(spent) / count };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

/** Rounds alternate between a new empty store and one holding STORED_KEYS keys; medians of each. */
async function measureIdempotency(): Promise<{ empty: Round; full: Round }> {
  // Warm the JIT on a store of its own, so the first measured round is not the slower one.
  await round(new MemoryIdempotencyStore(), 'warm', MEASURED);
  const empties: Round[] = [];
  const fulls: Round[] = [];
  for (let i = 0; i < ROUNDS; i += 1) {
    empties.push(await round(new MemoryIdempotencyStore(), `empty-${i}`, MEASURED));
    const full = new MemoryIdempotencyStore();
    await round(full, 'fill', STORED_KEYS);
    fulls.push(await round(full, `full-${i}`, MEASURED));
  }
  const medians = (rounds: Round[]): Round => ({ keysPerSecond: median(rounds.map((r) => r.keysPerSecond)), cpuMsPerKey: median(rounds.map((r) => r.cpuMsPerKey)) });
  return { empty: medians(empties), full: medians(fulls) };
}

/** The store's rate holding STORED_KEYS keys against its rate empty, and the CPU time a key costs. */
export async function idempotencyRow(): Promise<Measurement> {
  progress(`  idempotency store: ${ROUNDS} rounds of ${MEASURED.toLocaleString('en-US')} new keys, empty and holding ${STORED_KEYS.toLocaleString('en-US')}…`);
  const { empty, full } = await measureIdempotency();
  // The time a key costs shows what the share means for a createPost, which takes milliseconds.
  const microsPerKey = (r: Round): string => (1e6 / r.keysPerSecond).toFixed(2);
  const check = shareCheck(full.keysPerSecond, empty.keysPerSecond, TARGET_SHARE, 'empty');
  return {
    // CPU per key: what a createPost spends in the store, next to its milliseconds over HTTP.
    cpuMsPerRequest: full.cpuMsPerKey,
    checks: [{ ...check, measured: `${check.measured} (${microsPerKey(full)} vs ${microsPerKey(empty)} µs a key)` }],
    problems: [],
    details: { storedKeys: STORED_KEYS, measuredKeys: MEASURED, rounds: ROUNDS, empty, full, extraMicrosPerKey: 1e6 / full.keysPerSecond - 1e6 / empty.keysPerSecond },
  };
}
