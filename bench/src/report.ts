// A run's figures as JSON, one file per run under bench/reports/, with the machine they were
// measured on: figures only compare on the same one.
import { mkdirSync, writeFileSync } from 'node:fs';
import { arch, availableParallelism, cpus, platform, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type LOAD } from './load.js';
import { type Row } from './row.js';

export interface Machine {
  cpu: string;
  cores: number;
  usable: number;
  node: string;
  platform: string;
  arch: string;
  memoryGiB: number;
}

export function machine(): Machine {
  return {
    cpu: cpus()[0]?.model.trim() ?? 'unknown CPU',
    cores: cpus().length,
    usable: availableParallelism(),
    node: process.version,
    platform: platform(),
    arch: arch(),
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
  };
}

export function describeMachine(m: Machine): string {
  return `${m.cpu}, ${m.cores} cores (${m.usable} usable), ${m.memoryGiB} GiB RAM, Node ${m.node}, ${m.platform} ${m.arch}`;
}

export interface Report {
  startedAt: string;
  seconds: number;
  machine: Machine;
  load: typeof LOAD;
  rows: Row[];
  problems: string[];
}

/** Writes bench/reports/bench-<start time>.json; answers its path. */
export function writeReport(report: Report): string {
  const dir = fileURLToPath(new URL('../reports/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `bench-${report.startedAt.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}
