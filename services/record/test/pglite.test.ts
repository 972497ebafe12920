import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, relative as relativePath } from 'node:path';
import { StartupError } from '@agentroom/kit/process';
import { afterAll, describe, expect, it } from 'vitest';
import { DATA_DIR_LOCK } from '../src/data-dir.js';
import { openPGlite } from '../src/db.js';
import { MIGRATIONS } from '../src/migrations.js';
import { openRecordStore } from '../src/store-sql.js';
import { post, reply } from './support.js';

// The embedded default with DATA_DIR: the record survives the process (`npm start` keeps the room across restarts).
const parent = mkdtempSync(join(tmpdir(), 'agentroom-record-pglite-'));
/** A folder that does not exist yet, two levels down: the record makes it. */
const dataDir = join(parent, 'data', 'record');

afterAll(() => rmSync(parent, { recursive: true, force: true }));

it('keeps the record in a DATA_DIR folder (made when missing) across a close and an open, and migrates it once', async () => {
  const first = await openRecordStore({ dataDir });
  expect(first.kind).toBe('pglite');
  await first.archive([post('1-0', 'kept on disk'), reply('2-0', 'and its reply', '1-0')]);
  await first.acquireLease('one', 10_000);
  await first.advancePosition('one', '2-0');
  await first.close();

  const again = await openRecordStore({ dataDir });
  expect((await again.getPost('1-0'))?.replyCount).toBe(1);
  expect((await again.listReplies('1-0', 10))?.items.map((item) => item.id)).toEqual(['2-0']);
  expect(await again.position()).toBe('2-0');
  expect((await again.search({ terms: [{ kind: 'words', words: ['disk'], exclude: false }], sort: 'relevance', limit: 5 })).items).toHaveLength(1);
  await again.close();

  const db = await openPGlite(dataDir);
  expect(await db.query('SELECT version FROM schema_migrations ORDER BY version')).toEqual(MIGRATIONS.map(({ version }) => ({ version })));
  await db.close();
}, 120_000);

it("gathers the planner's statistics itself as the record grows (PGlite runs no autovacuum), so searches use the indexes", async () => {
  const store = await openRecordStore({});
  const rowsSeen = async (): Promise<number> => {
    const [row] = await store['write'].query<{ n: number }>("SELECT reltuples::integer AS n FROM pg_class WHERE relname = 'posts'");
    return Number(row?.n ?? 0);
  };
  const batch = (from: number, count: number) => Array.from({ length: count }, (_, i) => post(`${from + i}-0`, `post number ${from + i} about lanterns`));
  await store.archive(batch(1_000, 500));
  // Fewer new posts than the least that calls for statistics: none gathered since the store opened empty.
  expect(await rowsSeen()).toBeLessThan(500);
  await store.archive(batch(2_000, 600));
  expect(await rowsSeen()).toBe(1_100);
  await store.close();
}, 120_000);

describe('DATA_DIR, one process at a time', () => {
  const folder = join(parent, 'locked');
  const lockOf = (pid: number): string => JSON.stringify({ pid, host: hostname(), since: '2026-01-01T00:00:00.000Z' });

  it('refuses the folder while another process holds it, naming the folder and that process; takes it over once that process is killed', async () => {
    await (await openPGlite(folder)).close();
    // The lock an `npm start` would leave, by a process that runs.
    const holder = spawn('sleep', ['60'], { stdio: 'ignore' });
    const exited = new Promise((resolve) => holder.once('exit', resolve));
    try {
      writeFileSync(join(folder, DATA_DIR_LOCK), lockOf(holder.pid ?? 0));
      const refused = await openPGlite(folder).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(StartupError);
      expect((refused as Error).message).toBe(
        `DATA_DIR ${folder} is in use by process ${holder.pid} (since 2026-01-01T00:00:00.000Z): stop that process, or set another DATA_DIR (if no such process runs, remove ${join(folder, DATA_DIR_LOCK)})`,
      );
    } finally {
      holder.kill('SIGKILL');
      await exited;
    }
    // Killed with SIGKILL, it left its lock behind: stale, taken over at once.
    const db = await openPGlite(folder);
    expect(JSON.parse(readFileSync(join(folder, DATA_DIR_LOCK), 'utf8'))).toMatchObject({ pid: process.pid });
    // This process itself does not open it twice either, however the folder is spelled.
    await expect(openPGlite(folder)).rejects.toThrow(`DATA_DIR ${folder} is open in this process already`);
    const relative = relativePath(process.cwd(), folder);
    await expect(openPGlite(relative)).rejects.toThrow(`DATA_DIR ${relative} is open in this process already`);
    await db.close();
    expect(existsSync(join(folder, DATA_DIR_LOCK))).toBe(false);
  }, 60_000);

  it('takes over a lock with its own pid (a container restarted with the same pid) or a half-written one', async () => {
    for (const stale of [lockOf(process.pid), '{"pid":']) {
      writeFileSync(join(folder, DATA_DIR_LOCK), stale);
      const db = await openPGlite(folder);
      // Ours now, written afresh.
      expect(readFileSync(join(folder, DATA_DIR_LOCK), 'utf8')).not.toBe(stale);
      expect(JSON.parse(readFileSync(join(folder, DATA_DIR_LOCK), 'utf8'))).toMatchObject({ pid: process.pid });
      await db.close();
      expect(existsSync(join(folder, DATA_DIR_LOCK))).toBe(false);
    }
  }, 60_000);
});
