import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { freePort } from '@agentroom/kit/local';
import { describe, expect, it } from 'vitest';
import { root } from '../support/processes.js';

/**
 * The processes of `npm run cluster` (built: `node launcher/dist/cluster.js`) and `npm start` never
 * outlive what started them, however it died, and the cluster's launcher always honours SIGTERM
 * (`npm start`'s graceful SIGTERM is e2e/rest/http.test.ts's). Linux only: processes are found and
 * watched through /proc.
 */

/** Every process's parent, from /proc/<pid>/stat; zombies count as gone (they run nothing and hold no port). */
function processTable(): Map<number, { ppid: number; zombie: boolean }> {
  const table = new Map<number, { ppid: number; zombie: boolean }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // `pid (comm) state ppid …`: comm may hold spaces and parentheses, so read after the last ')'.
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      table.set(Number(entry), { ppid: Number(ppid), zombie: state === 'Z' || state === 'X' });
    } catch {
      // exited while we listed
    }
  }
  return table;
}

/** `pid` and every live process below it. */
function processTree(pid: number): number[] {
  const table = processTable();
  const tree = [pid];
  for (let i = 0; i < tree.length; i += 1) {
    for (const [child, { ppid, zombie }] of table) if (ppid === tree[i] && !zombie) tree.push(child);
  }
  return tree;
}

function alive(pids: readonly number[]): number[] {
  const table = processTable();
  return pids.filter((pid) => {
    const entry = table.get(pid);
    return entry !== undefined && !entry.zombie;
  });
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '(gone)';
  }
}

/** Waits until none of `pids` runs; fails naming those still running after `timeoutMs`. */
async function allGone(pids: readonly number[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = alive(pids);
    if (left.length === 0) return;
    if (Date.now() > deadline) {
      const described = left.map((pid) => `${pid} ${commandOf(pid)}`).join('\n');
      // Whatever is left is killed here, so that a failing run does not leave it behind either.
      for (const pid of left) process.kill(pid, 'SIGKILL');
      throw new Error(`${left.length} process(es) still running ${timeoutMs / 1000} s later:\n${described}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** How long every process has to be gone: "a few seconds", on a machine shared with other test runs. */
const GONE_WITHIN_MS = 8_000;

/** The line a launcher prints once it serves: the cluster's ready line, or `npm start`'s. */
const READY = /"msg":"(cluster ready|Agent Room is running)/;

/**
 * An intermediate Node process that starts `script` (a built launcher) with a pipe on its stdout,
 * which it reads, and the launcher's pid once it printed its ready line: as `npm run cluster`, the
 * bench or a test runs it. Killing the intermediate is killing the launcher's parent.
 */
async function launcherUnderParent(script: string, args: string[], env: Record<string, string>): Promise<{ parent: ChildProcess; launcher: number }> {
  const parentScript = `
    const { spawn } = require('node:child_process');
    const { createInterface } = require('node:readline');
    const child = spawn(process.execPath, process.argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    createInterface({ input: child.stdout }).on('line', (line) => { if (${READY}.test(line)) console.log(JSON.stringify({ launcher: child.pid })); });
    createInterface({ input: child.stderr }).on('line', (line) => console.error(line));
    child.once('exit', (code, signal) => console.error('launcher exited', code, signal));
  `;
  const parent = spawn(process.execPath, ['-e', parentScript, script, ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const errors: string[] = [];
  createInterface({ input: parent.stderr! }).on('line', (line) => errors.push(line));
  const launcher = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} was not ready in time:\n${errors.slice(-20).join('\n')}`)), 90_000);
    createInterface({ input: parent.stdout! }).on('line', (line) => {
      clearTimeout(timer);
      resolve((JSON.parse(line) as { launcher: number }).launcher);
    });
    // 'close', not 'exit': by then what it printed has been read.
    parent.once('close', () => reject(new Error(`the parent exited before ${script} was ready:\n${errors.slice(-20).join('\n')}`)));
  });
  return { parent, launcher };
}

/**
 * The launcher as our own child, its stdout a pipe we stop reading and close once it is ready: what
 * it and its processes log from then on fails with EPIPE, as when the process reading them died.
 */
async function launcherWithClosedStdout(script: string, args: string[], env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, [script, ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => lines.push(line));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} was not ready in time:\n${lines.slice(-20).join('\n')}`)), 90_000);
    const reader = createInterface({ input: child.stdout! });
    reader.on('line', (line) => {
      lines.push(line);
      if (!READY.test(line)) return;
      clearTimeout(timer);
      reader.close();
      child.stdout!.destroy();
      resolve();
    });
    // 'close', not 'exit': by then what it printed has been read.
    child.once('close', (code, signal) => reject(new Error(`${script} exited (${signal ?? code}) before it was ready:\n${lines.slice(-20).join('\n')}`)));
  });
  return child;
}

async function clusterEnv(): Promise<Record<string, string>> {
  return { PORT: String(await freePort()), REDIS_URL: '', LOG_LEVEL: 'info', LOG_FORMAT: 'json', SHUTDOWN_GRACE_MS: '1000' };
}

const CLUSTER = 'launcher/dist/cluster.js';
const START = 'launcher/dist/start.js';

describe('npm run cluster: no process outlives its parent', () => {
  it('stops the launcher and every process it started once its parent is killed with SIGKILL', async () => {
    const { parent, launcher } = await launcherUnderParent(CLUSTER, [], await clusterEnv());
    const tree = processTree(launcher);
    // The launcher, redis-server, room, messaging, delivery, auth, an edge and the router (and redis-server's watcher).
    expect(tree.length).toBeGreaterThanOrEqual(8);
    parent.kill('SIGKILL');
    await allGone(tree, GONE_WITHIN_MS);
  }, 150_000);

  it('has every process it started exit once the launcher itself is killed with SIGKILL', async () => {
    const { parent, launcher } = await launcherUnderParent(CLUSTER, [], await clusterEnv());
    const tree = processTree(launcher);
    expect(tree.length).toBeGreaterThanOrEqual(8);
    process.kill(launcher, 'SIGKILL');
    try {
      await allGone(tree, GONE_WITHIN_MS);
    } finally {
      parent.kill('SIGKILL');
    }
  }, 150_000);

  it('honours SIGTERM, stopping every process, even once nobody reads what they log', async () => {
    const child = await launcherWithClosedStdout(CLUSTER, [], await clusterEnv());
    const tree = processTree(child.pid ?? 0);
    expect(tree.length).toBeGreaterThanOrEqual(8);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    await allGone(tree, GONE_WITHIN_MS);
    expect(await exited).toBe(0);
  }, 150_000);
});

describe('npm start: no process outlives its parent', () => {
  it('exits once its parent is killed with SIGKILL', async () => {
    const { parent, launcher } = await launcherUnderParent(START, [], { PORT: String(await freePort()), REDIS_URL: '', LOG_LEVEL: 'info', LOG_FORMAT: 'json' });
    parent.kill('SIGKILL');
    await allGone([launcher], GONE_WITHIN_MS);
  }, 60_000);
});
