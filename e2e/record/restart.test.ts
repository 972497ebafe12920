import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { serviceClient } from '@agentroom/kit/grpc';
import { freePort } from '@agentroom/kit/local';
import { approvedToken } from '@agentroom/testkit';
import { recordProto } from '@agentroom/proto';
import { afterAll, describe, expect, it } from 'vitest';
import { root } from '../support/processes.js';
import { recordedIds } from '../support/record.js';

/**
 * `npm start` with DATA_DIR (`node launcher/dist/start.js`, built by `npm test`): posts made, the
 * process stopped (SIGTERM, as Ctrl-C does) and started again on the same folder: every post is
 * still in the record, and the record goes on keeping the posts made after the restart, although
 * the room (in memory) started empty again. Read through the record's gRPC API, whose port the
 * start line gives.
 */
interface Started {
  child: ChildProcess;
  origin: string;
  /** The record's gRPC address, from the start line. */
  record: string;
  exited: Promise<number | null>;
}

const dir = mkdtempSync(join(tmpdir(), 'agentroom-data-dir-'));
const CURSOR_SECRET = randomBytes(32).toString('base64url');
const running: Started[] = [];

/** `npm start` on the folder, on a port of its own; with the exit code it will end with. */
function spawnStart(port: number): { child: ChildProcess; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ['launcher/dist/start.js'], {
    cwd: root,
    env: { ...process.env, PORT: String(port), DATA_DIR: dir, CURSOR_SECRET, LOG_FORMAT: 'json', LOG_LEVEL: 'info', REDIS_URL: '', DATABASE_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  return { child, exited: new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))) };
}

/** `npm start` expected to refuse: its exit code and the lines it wrote to stderr. */
async function startRefused(): Promise<{ code: number | null; stderr: string[] }> {
  const { child, exited } = spawnStart(await freePort());
  const stderr: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  child.stdout?.resume();
  const code = await exited;
  return { code, stderr };
}

async function startEmbedded(): Promise<Started> {
  const port = await freePort();
  const { child, exited } = spawnStart(port);
  const lines: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => lines.push(line));
  const recordPort = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start was not running within 60 s:\n${lines.slice(-20).join('\n')}`)), 60_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(line);
      if (!line.includes('Agent Room is running')) return;
      clearTimeout(timer);
      resolve((JSON.parse(line) as { recordPort: number }).recordPort);
    });
    void exited.then((code) => reject(new Error(`npm start exited with ${code}:\n${lines.slice(-20).join('\n')}`)));
  });
  const started = { child, origin: `http://127.0.0.1:${port}`, record: `127.0.0.1:${recordPort}`, exited };
  running.push(started);
  return started;
}

async function stop(started: Started): Promise<number | null> {
  started.child.kill('SIGTERM');
  return started.exited;
}

afterAll(async () => {
  for (const started of running) if (started.child.exitCode === null) started.child.kill('SIGKILL');
  await Promise.all(running.map((started) => started.exited));
  rmSync(dir, { recursive: true, force: true });
});

async function createPost(origin: string, token: string, text: string, replyTo?: string): Promise<string> {
  const response = await fetch(`${origin}/api/v1/posts`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
    body: JSON.stringify({ text, ...(replyTo === undefined ? {} : { reply_to: replyTo }) }),
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as { id: string }).id;
}

describe('npm start with DATA_DIR', () => {
  it('keeps every post in the record across a restart, and keeps recording after it', async () => {
    const first = await startEmbedded();
    const token = await approvedToken(first.origin, ['posts:write'], 'keeper');
    const made: string[] = [];
    for (let i = 0; i < 5; i += 1) made.push(await createPost(first.origin, token, `kept across restarts ${i}`));
    made.push(await createPost(first.origin, token, 'a reply that stays in its thread', made[0]));
    // Within a second of each 201 the record has it; the stop stores the follower's position.
    await expect.poll(() => recordedIds(first.record), { timeout: 5_000 }).toEqual([...made].reverse());
    expect(await stop(first)).toBe(0);

    const second = await startEmbedded();
    expect(await recordedIds(second.record)).toEqual([...made].reverse());
    const record = serviceClient(recordProto().RecordService, second.record);
    try {
      const thread = await record.call('getArchivedPost', { postId: made[0] ?? '' });
      expect(thread.post).toMatchObject({ text: 'kept across restarts 0', replyCount: 1 });
      const replies = await record.call('listArchivedReplies', { postId: made[0] ?? '' });
      expect(replies.posts.map((post) => post.id)).toEqual([made[5]]);
    } finally {
      record.close();
    }
    // The room started empty; the record follows it on from where it stopped.
    const after = await createPost(second.origin, await approvedToken(second.origin, ['posts:write'], 'keeper'), 'made after the restart');
    await expect.poll(() => recordedIds(second.record), { timeout: 5_000 }).toEqual([after, ...[...made].reverse()]);
    expect(await stop(second)).toBe(0);
  }, 120_000);

  it('refuses a second npm start on the same folder in one line naming it and the process holding it; a kill -9 leaves no lock that blocks the next', async () => {
    const first = await startEmbedded();
    const refused = await startRefused();
    expect(refused.code).toBe(1);
    expect(refused.stderr).toHaveLength(1);
    expect(refused.stderr[0]).toMatch(new RegExp(`^Agent Room could not start: DATA_DIR ${dir} is in use by process ${first.child.pid} `));
    // The first one never noticed.
    expect((await fetch(`${first.origin}/api/v1/posts`)).status).toBe(200);
    first.child.kill('SIGKILL');
    await first.exited;
    const next = await startEmbedded();
    expect(await stop(next)).toBe(0);
  }, 120_000);

  it('after kill -9, keeps what it had and follows the room again at once, without waiting out the dead process lease', async () => {
    const first = await startEmbedded();
    const token = await approvedToken(first.origin, ['posts:write'], 'crasher');
    const kept = await recordedIds(first.record);
    const made = await createPost(first.origin, token, 'written just before a crash');
    await expect.poll(() => recordedIds(first.record), { timeout: 5_000 }).toEqual([made, ...kept]);
    first.child.kill('SIGKILL');
    await first.exited;

    const second = await startEmbedded();
    const record = serviceClient(recordProto().RecordService, second.record);
    try {
      // The lease (10 s) is the dead process's own: the folder is one process's at a time, so it is taken over at once.
      await expect.poll(async () => (await record.call('getRecordStatus', {})).following, { timeout: 5_000 }).toBe(true);
      expect(await recordedIds(second.record)).toEqual([made, ...kept]);
    } finally {
      record.close();
    }
    expect(await stop(second)).toBe(0);
  }, 120_000);
});
