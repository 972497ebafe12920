import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig } from '@agentroom/kit/config';
import { freePort, NODE_FLAGS } from '@agentroom/kit/local';
import { describe, expect, it } from 'vitest';
import { recordEnv } from '../src/config.js';

const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

/** The built record process with `env`: its exit code and what it wrote to stderr (within 15 s). */
function runMain(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...NODE_FLAGS, MAIN], {
      env: { ...process.env, LOG_LEVEL: 'silent', RECORD_GRPC_ADDR: '127.0.0.1:0', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // One that starts when it should not is stopped, not left running: its code is then null.
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe("the record's configuration", () => {
  it('has the defaults every part names', () => {
    const config = loadConfig(recordEnv, {});
    expect(config).toMatchObject({ RECORD_GRPC_ADDR: '0.0.0.0:50055', ROOM_ADDR: '127.0.0.1:50051', RECORD_RETENTION_DAYS: 0 });
    expect(config.DATABASE_URL).toBeUndefined();
    expect(config.DATA_DIR).toBeUndefined();
    expect(loadConfig(recordEnv, { DATABASE_URL: '', DATA_DIR: '' })).toMatchObject({ DATABASE_URL: undefined, DATA_DIR: undefined });
  });

  it('refuses a bad value in one line naming the variable, never printing a password', () => {
    const refused = (env: Record<string, string>): string => {
      try {
        loadConfig(recordEnv, env);
      } catch (error) {
        if (error instanceof ConfigError) return error.message;
      }
      throw new Error(`${JSON.stringify(env)} was accepted`);
    };
    expect(refused({ DATABASE_URL: 'mysql://root:hunter2@db/agentroom' })).toMatch(
      /^invalid configuration: DATABASE_URL=.*must start with postgres:\/\/ or postgresql:\/\//,
    );
    expect(refused({ DATABASE_URL: 'mysql://root:hunter2@db/agentroom' })).not.toContain('hunter2');
    expect(refused({ RECORD_RETENTION_DAYS: '-1' })).toMatch(/RECORD_RETENTION_DAYS="-1": must be 0/);
    expect(refused({ RECORD_RETENTION_DAYS: 'forever' })).toMatch(/RECORD_RETENTION_DAYS="forever"/);
    expect(refused({ DATABASE_READ_URL: 'postgres://replica/agentroom' })).toMatch(/DATABASE_READ_URL.*needs DATABASE_URL/);
  });
});

describe('the record process', () => {
  it('says in one line that PostgreSQL is unreachable, and exits 1', async () => {
    const port = await freePort();
    const { code, stderr } = await runMain({ DATABASE_URL: `postgres://agentroom:secret@127.0.0.1:${port}/agentroom` });
    expect(code).toBe(1);
    const lines = stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^record could not start: .*127\.0\.0\.1:\d+/);
    expect(stderr).not.toContain('secret');
  });

  it('refuses in one line a DATA_DIR another process holds, naming the folder and that process, and exits 1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentroom-record-held-'));
    const holder = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      writeFileSync(join(dir, 'agentroom.lock'), JSON.stringify({ pid: holder.pid, host: hostname(), since: new Date().toISOString() }));
      const { code, stderr } = await runMain({ DATA_DIR: dir, DATABASE_URL: '' });
      expect(code).toBe(1);
      const lines = stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^record could not start: DATA_DIR ${dir} is in use by process ${holder.pid} `));
    } finally {
      holder.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
