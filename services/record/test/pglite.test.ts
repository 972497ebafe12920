import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { openPGlite } from '../src/db.js';
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
  expect(await db.query('SELECT version FROM schema_migrations ORDER BY version')).toEqual([{ version: 1 }, { version: 2 }]);
  await db.close();
}, 120_000);
