// One row of the bench's table: what a benchmark measured, and its targets, each met or not.
import { type Servers } from './servers.js';

/** What `npm run bench -- <key> ...` selects benchmarks by; nothing selects all. */
export const KEYS = [
  'baseline',
  'list',
  'cursor',
  'create',
  'idempotency',
  'sse',
  'mentions',
  'mcp-changes',
  'webhooks',
  'memory',
  'search',
  'record',
  'reference',
  'tracing',
] as const;
export type Key = (typeof KEYS)[number];

/** The bare node:http baseline's row: every HTTP row's rate is shown as a share of its. */
export const BARE_ID = 'bare';

/** One target of a row: what it asks, what was measured against it, and whether it holds. */
export interface Check {
  target: string;
  measured: string;
  met: boolean;
  /** A figure the issue asks to see, with no target to meet: printed without met or NOT MET. */
  reportOnly?: boolean;
}

export interface Row {
  /** Stable across runs, for the JSON report and for rows that compare with another. */
  id: string;
  label: string;
  /** HTTP rows only: the rate at full load, and so its share of the bare baseline's. */
  reqPerSec?: number;
  p50Ms?: number;
  p99Ms?: number;
  /** CPU time of every process serving the load, summed, per request (or per delivery, per key: the row says). */
  cpuMsPerRequest?: number;
  checks: Check[];
  /** What makes the row's figures untrustworthy; the run is then marked invalid. */
  problems: string[];
  /** Everything else measured, for the JSON report. */
  details: Record<string, unknown>;
}

/** What a benchmark may use: the servers, started on first use, and the rows measured before it. */
export interface Context {
  servers: Servers;
  /** req/s of a row measured earlier in this run, by id. */
  rateOf(id: string): number | undefined;
}

/** What a benchmark measures: its row but for the names, which the benchmark carries. */
export type Measurement = Omit<Row, 'id' | 'label'>;

export interface Benchmark {
  id: string;
  key: Key;
  label: string;
  /** Its targets are shares of the bare baseline's rate: selecting it measures the baselines too. */
  comparesToBare: boolean;
  run(context: Context): Promise<Measurement>;
}

export function percent(share: number): string {
  return Number.isFinite(share) ? `${(share * 100).toFixed(1)} %` : 'n/a';
}

/** `value` must be at least `share` of `of` (another row's rate, or a rate measured beside it). */
export function shareCheck(value: number, of: number | undefined, share: number, ofWhat: string): Check {
  const measured = of === undefined ? Number.NaN : value / of;
  return { target: `≥ ${percent(share)} of ${ofWhat}`, measured: percent(measured), met: measured >= share };
}

/** Three significant digits, or a whole number from 100 up: 0.0616, 2.75, 19.5, 1,985. */
export function figure(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  return Math.abs(value) >= 100 ? Math.round(value).toLocaleString('en-US') : value.toPrecision(3);
}

/** A figure reported beside a row's targets, with none of its own. */
export function reported(what: string, measured: string): Check {
  return { target: `${what} (reported)`, measured, met: true, reportOnly: true };
}

/** `value` (in `unit`) must be at most `limit`. */
export function atMostCheck(what: string, value: number, limit: number, unit: string, measuredNote = ''): Check {
  return { target: `${what} ≤ ${limit} ${unit}`, measured: `${figure(value)} ${unit}${measuredNote}`, met: value <= limit };
}

/** `value` (in `unit`) must be at least `limit`. */
export function atLeastCheck(what: string, value: number, limit: number, unit: string, measuredNote = ''): Check {
  return { target: `${what} ≥ ${limit} ${unit}`, measured: `${figure(value)} ${unit}${measuredNote}`, met: value >= limit };
}
