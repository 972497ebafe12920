import { type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { freePort } from '@agentroom/kit/local';
import { approvedToken } from '@agentroom/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedProcess } from '../support/processes.js';

/**
 * `npm start` (`node launcher/dist/start.js`, built by `npm test`) keeps its record on a worker
 * thread of its own (docs/decisions.md §39), so that PGlite's work is not done on the event loop
 * that answers every request; what it archives, logs and counts is still the process's.
 */
let child: ChildProcess | undefined;

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((resolve) => child?.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
});

/** Each thread of process `pid` by the name Linux gives it, with the CPU time it used (ticks). */
function threadsOf(pid: number): { name: string; cpuTicks: number }[] {
  return readdirSync(`/proc/${pid}/task`).map((task) => {
    const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8');
    // Fields after the name (which is in parentheses): utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), cpuTicks: Number(fields[11]) + Number(fields[12]) };
  });
}

describe('npm start', () => {
  it('archives posts on a thread of its own, logs its lines with the others and counts them in /metrics, and stops cleanly', async () => {
    const [port, adminPort] = [await freePort(), await freePort()];
    const {
      child: started,
      exited,
      lines,
    } = await startEmbeddedProcess({
      PORT: String(port),
      ADMIN_PORT: String(adminPort),
      LOG_FORMAT: 'json',
      LOG_LEVEL: 'info',
      REDIS_URL: '',
      DATABASE_URL: '',
      DATA_DIR: '',
    });
    child = started;
    const origin = `http://127.0.0.1:${port}`;
    const token = await approvedToken(origin, ['posts:write'], 'threaded');
    for (let i = 0; i < 3; i += 1) {
      const made = await fetch(`${origin}/api/v1/posts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ text: `kept by the record's thread ${i}` }),
      });
      expect(made.status).toBe(201);
    }
    const archived = async (): Promise<number> => {
      const metrics = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
      return Number(/^agentroom_record_posts_archived_total (\S+)$/m.exec(metrics)?.[1] ?? 0);
    };
    await expect.poll(archived, { timeout: 10_000 }).toBe(3);

    // Node names a worker's thread after the worker: the record's, which has done the archiving's work.
    const threads = threadsOf(started.pid ?? 0);
    const record = threads.filter((thread) => thread.name === 'record');
    expect(record, threads.map((thread) => thread.name).join(', ')).toHaveLength(1);
    expect(record[0]?.cpuTicks).toBeGreaterThan(0);
    // Its lines are the process's, in the same JSON form as every service's.
    const ready = lines.find((line) => line.includes('"msg":"record service ready"'));
    expect(JSON.parse(ready ?? '{}')).toMatchObject({ level: 30, service: 'record', storage: 'pglite' });

    started.kill('SIGTERM');
    expect(await exited).toBe(0);
  }, 90_000);
});
