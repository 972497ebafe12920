import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { StartupError } from '@agentroom/kit/process';
import { z } from 'zod';

/** The lock's file, in DATA_DIR beside PGlite's own files (PostgreSQL's postmaster.pid does the same for its folder). */
export const DATA_DIR_LOCK = 'agentroom.lock';

const Holder = z.object({ pid: z.number().int().positive(), host: z.string(), since: z.string() });
type Holder = z.infer<typeof Holder>;

/** The folders this process holds: a second open of one in the same process is refused too. */
const held = new Set<string>();

/** Whether the process that wrote `holder` still runs (on this machine; another machine's is taken to run). */
function running(holder: Holder): boolean {
  if (holder.host !== hostname()) return true;
  // Our own pid in a lock we do not hold: a previous life of this process (a container restarted with the same pid).
  if (holder.pid === process.pid) return false;
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function holderOf(path: string): Holder | undefined {
  try {
    const parsed = Holder.safeParse(JSON.parse(readFileSync(path, 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    // Unreadable or half written (the writer died between its create and its write): no one holds it.
    return undefined;
  }
}

/**
 * Takes DATA_DIR for this process, or refuses with a one-line StartupError naming the folder and
 * the process holding it: two processes opening PGlite on one folder would corrupt it. The lock is a
 * file created only when absent (O_EXCL) holding our pid; one whose process is gone (killed with
 * SIGKILL, or the machine restarted) is taken over. Answers its release.
 */
export function lockDataDir(dir: string): () => void {
  // Absolute, so that `./data` and its full path are one folder to this process.
  const path = resolve(dir, DATA_DIR_LOCK);
  if (held.has(path)) throw new StartupError(`DATA_DIR ${dir} is open in this process already: one PGlite at a time may open a folder`);
  const mine: Holder = { pid: process.pid, host: hostname(), since: new Date().toISOString() };
  for (let attempt = 0; ; attempt += 1) {
    try {
      writeFileSync(path, JSON.stringify(mine), { flag: 'wx' });
      break;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST') throw new StartupError(`DATA_DIR ${dir} could not be locked (${code ?? String(error)}): check that the folder is writable`);
    }
    const holder = holderOf(path);
    if (holder !== undefined && running(holder)) {
      const who = holder.host === hostname() ? `process ${holder.pid}` : `process ${holder.pid} on ${holder.host}`;
      throw new StartupError(
        `DATA_DIR ${dir} is in use by ${who} (since ${holder.since}): stop that process, or set another DATA_DIR (if no such process runs, remove ${path})`,
      );
    }
    // Its holder is gone: the lock is stale. Once only, so two starts racing for it cannot loop.
    if (attempt > 0) throw new StartupError(`DATA_DIR ${dir} is being taken by another process that is starting: start one at a time`);
    rmSync(path, { force: true });
  }
  held.add(path);
  return () => {
    held.delete(path);
    // Only our own: a lock another process took over meanwhile stays.
    if (holderOf(path)?.pid === process.pid) rmSync(path, { force: true });
  };
}
