// The one table a run prints: a line per row, and one more per further target of a row.
import { BARE_ID, figure, percent, type Row } from './row.js';

const HEADER = ['row', 'req/s', 'vs bare', 'p50 ms', 'p99 ms', 'CPU ms/req', 'target', 'measured', 'met'];
const DASH = '—';

function latency(ms: number | undefined): string {
  if (ms === undefined) return DASH;
  return Number.isInteger(ms) ? String(ms) : ms.toFixed(1);
}

function cpu(ms: number | undefined): string {
  return ms === undefined ? DASH : figure(ms);
}

function lines(row: Row, bareRate: number | undefined): string[][] {
  const rate = row.reqPerSec;
  const figures = [
    row.label,
    rate === undefined ? DASH : Math.round(rate).toLocaleString('en-US'),
    rate === undefined || bareRate === undefined ? DASH : percent(rate / bareRate),
    latency(row.p50Ms),
    latency(row.p99Ms),
    cpu(row.cpuMsPerRequest),
  ];
  if (row.checks.length === 0) return [[...figures, 'baseline', '', '']];
  return row.checks.map((check, i) => [
    ...(i === 0 ? figures : figures.map(() => '')),
    check.target,
    check.measured,
    check.reportOnly ? DASH : check.met ? 'met' : 'NOT MET',
  ]);
}

/** Left-aligned text columns (row, target, measured, met), right-aligned figures. */
const LEFT = new Set([0, 6, 7, 8]);

export function formatTable(rows: readonly Row[]): string {
  const bareRate = rows.find((row) => row.id === BARE_ID)?.reqPerSec;
  const cells = [HEADER, ...rows.flatMap((row) => lines(row, bareRate))];
  const widths = HEADER.map((_, column) => Math.max(...cells.map((line) => line[column]!.length)));
  const format = (line: string[]): string =>
    line
      .map((cell, column) => (LEFT.has(column) ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)))
      .join('  ')
      .trimEnd();
  return cells.map(format).join('\n');
}
