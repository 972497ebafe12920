// CPU time spent by the processes that serve a load: user + system time of each, read from
// /proc/<pid>/stat before and after the measured run, summed.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** /proc/<pid>/stat counts in clock ticks (USER_HZ); 100 a second on Linux unless the kernel says otherwise. */
const TICKS_PER_SECOND = ((): number => {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of process `pid` (every thread of it) so far, in milliseconds. */
export function processCpuMs(name: string, pid: number): number {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    throw new Error(`${name} (pid ${pid}) is gone: it exited during the run, so its CPU time cannot be counted`);
  }
  // Field 2, the command, is in parentheses and may hold spaces: count from the last ')'. What
  // follows starts at field 3 (state), so utime (field 14) and stime (15) are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1_000) / TICKS_PER_SECOND;
}

/**
 * utime + stime of each thread of process `pid` so far, in milliseconds, summed by the thread's name
 * (`main` for the one whose id is the process's; Node names a worker's thread after the worker).
 */
export function threadCpuMs(pid: number): Record<string, number> {
  const spent: Record<string, number> = {};
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8');
    } catch {
      continue; // a thread that ended meanwhile
    }
    const name = task === String(pid) ? 'main' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    spent[name] = (spent[name] ?? 0) + ((Number(fields[11]) + Number(fields[12])) * 1_000) / TICKS_PER_SECOND;
  }
  return spent;
}

/** Milliseconds of CPU by process name, over one measured span. */
export type CpuSpent = Record<string, number>;

export function totalCpuMs(spent: CpuSpent): number {
  return Object.values(spent).reduce((sum, ms) => sum + ms, 0);
}

/** Starts counting the CPU time of `pids` (by name); `stop` answers what each spent since. */
export function startCpu(pids: Record<string, number>): { stop(): CpuSpent } {
  const before = Object.entries(pids).map(([name, pid]) => ({ name, pid, ms: processCpuMs(name, pid) }));
  return { stop: () => Object.fromEntries(before.map(({ name, pid, ms }) => [name, processCpuMs(name, pid) - ms])) };
}
