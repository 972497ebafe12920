import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { exitingWithParent } from '../src/parent.js';

/** A program that is not Node, run as the launcher runs redis-server and Envoy: it exits once the pipe on its stdin ends. */
function startWatched(command: string, args: string[]) {
  const program = exitingWithParent(command, args);
  const child = spawn(program.command, program.args, { stdio: ['pipe', 'ignore', 'ignore'] });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited };
}

/** What a process runs, once it has started (the shell execs into the program). */
async function commandLine(pid: number, expected: string): Promise<string> {
  for (;;) {
    const line = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
    if (line === expected) return line;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('exitingWithParent', () => {
  it("runs the program itself under the child's process id, so signals and pids reach it", async () => {
    const { child, exited } = startWatched('sleep', ['30']);
    expect(await commandLine(child.pid ?? 0, 'sleep 30')).toBe('sleep 30');
    child.kill('SIGTERM');
    expect(await exited).toEqual({ code: null, signal: 'SIGTERM' });
    child.stdin.destroy();
  });

  it('stops the program with SIGTERM once its stdin ends, as when the process holding the pipe dies', async () => {
    const { child, exited } = startWatched('sleep', ['30']);
    await commandLine(child.pid ?? 0, 'sleep 30');
    child.stdin.destroy();
    expect(await exited).toEqual({ code: null, signal: 'SIGTERM' });
  });

  it('passes arguments through as they are, empty ones and spaces included', async () => {
    const { child, exited } = startWatched('sh', ['-c', 'test "$1" = "" && test "$2" = "a b" && exit 7', 'sh', '', 'a b']);
    expect(await exited).toEqual({ code: 7, signal: null });
    child.stdin.destroy();
  });
});
