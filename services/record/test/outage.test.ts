import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalPostgres, startPostgresServer } from '@agentroom/kit/local';
import { DomainError } from '@agentroom/kit/problems';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRecord } from '../src/index.js';
import { agent, post, type RecordClient, type RoomAndRecord, type RoomClient, startRoomAndRecord } from './service-support.js';

/**
 * PostgreSQL stopped under the record: its reads and searches answer `unavailable` (503 with
 * Retry-After at edge), never `internal`, while the room goes on taking posts; once PostgreSQL is
 * back, the record catches up with every post made meanwhile, and answers again.
 */
const dir = mkdtempSync(join(tmpdir(), 'agentroom-record-outage-'));
let postgres: LocalPostgres;
let setup: RoomAndRecord;
let room: RoomClient;
let running: RunningRecord;
let record: RecordClient;

beforeAll(async () => {
  // Its own folder, so that it starts again on the same data.
  const started = startPostgresServer({ dir, unsafeNoFsync: true }).then((server) => (postgres = server));
  setup = await startRoomAndRecord(started, (server) => Promise.resolve(server.url));
  ({ room, running, record } = setup);
}, 60_000);

afterAll(async () => {
  await setup?.stop();
  await postgres?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function slugOf(call: Promise<unknown>): Promise<string> {
  const error = await call.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  return error instanceof DomainError ? error.slug : `no problem: ${String(error)}`;
}

describe('PostgreSQL stopped and started again', () => {
  it('answers unavailable meanwhile, then catches up with every post the room took', async () => {
    await expect.poll(() => running.archiver.isFollowing, { timeout: 5_000 }).toBe(true);
    const scout = await agent(room, 'scout');
    const before = await post(room, scout, 'before the outage');
    await expect
      .poll(
        () =>
          record.call('getArchivedPost', { postId: before.id }).then(
            (answer) => answer.post?.id,
            () => undefined,
          ),
        { timeout: 5_000 },
      )
      .toBe(before.id);

    // Readiness (/readyz) checks the record's database.
    const [database] = running.dependencies;
    expect(database?.name).toBe('postgres');
    await expect(database?.check()).resolves.toBeUndefined();
    await postgres.stop();
    await expect(database?.check()).rejects.toThrow();
    const during: string[] = [];
    for (let i = 0; i < 5; i += 1) during.push((await post(room, scout, `during the outage ${i}`)).id);
    expect(await slugOf(record.call('getArchivedPost', { postId: before.id }))).toBe('unavailable');
    expect(await slugOf(record.call('listArchivedPosts', { limit: 5 }))).toBe('unavailable');
    expect(await slugOf(record.call('searchPosts', { q: 'outage' }))).toBe('unavailable');

    postgres = await startPostgresServer({ dir, port: postgres.port, unsafeNoFsync: true });
    await expect
      .poll(
        () =>
          record.call('listArchivedPosts', { limit: 10 }).then(
            (page) => page.posts.map((p) => p.id),
            () => [],
          ),
        { timeout: 15_000, interval: 100 },
      )
      .toEqual([...during].reverse().concat(before.id));
    const found = await record.call('searchPosts', { q: 'outage', sort: 'SEARCH_SORT_NEWEST' });
    expect(found.hits.map((hit) => hit.post?.id)).toEqual([...during].reverse().concat(before.id));
  }, 40_000);
});
