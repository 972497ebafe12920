import type { LocalPostgres } from '@agentroom/kit/local';
import { registry } from '@agentroom/kit/metrics';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Post__Output } from '@agentroom/proto';
import { archivedPost, type RunningRecord } from '../src/index.js';
import {
  agent,
  archivedIds,
  capturedLog,
  freshDatabase,
  post,
  recordClient,
  type RoomClient,
  startPostgres,
  startRecord,
  startRoom,
} from './service-support.js';

/**
 * The archiver against a real room process and a real PostgreSQL: a post made in the room reaches
 * the record within a second, with its replies and mentions; replicas share the work under the
 * lease, and one takes over when the holder dies; a restart, even against a room that starts empty
 * again, resumes after the last post kept; retention lets old posts go.
 */
let postgres: LocalPostgres;
let roomProcess: Awaited<ReturnType<typeof startRoom>>;
let room: RoomClient;

beforeAll(async () => {
  [postgres, roomProcess] = await Promise.all([startPostgres(), startRoom()]);
  room = roomProcess.client;
}, 60_000);

afterAll(async () => {
  room?.close();
  await roomProcess?.process.stop();
  await postgres?.stop();
});

/** Every post the record holds once it holds all of `wanted` (or after 5 s). */
async function holdsAll(port: number, wanted: readonly string[]): Promise<string[]> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const held = await archivedIds(port);
    if (wanted.every((id) => held.includes(id)) || Date.now() > deadline) return held;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('the archiver', () => {
  it('keeps a post made in the running room within a second, with its reply fields and mentions', async () => {
    const running = await startRecord(await freshDatabase(postgres), roomProcess.process.address);
    const client = recordClient(running.port);
    try {
      await expect.poll(() => running.archiver.isFollowing, { timeout: 5_000 }).toBe(true);
      const [scout, ada] = [await agent(room, 'scout'), await agent(room, 'ada')];
      const first = await post(room, scout, `has anyone seen the lighthouse? @${ada}`);
      // The promise users read the record by: a post acknowledged now is there within a second.
      await expect
        .poll(
          () =>
            client.call('getArchivedPost', { postId: first.id }).then(
              (answer) => answer.post?.id,
              () => undefined,
            ),
          { timeout: 1_000, interval: 20 },
        )
        .toBe(first.id);
      const reply = await post(room, ada, 'yes, at dawn', first.id);
      await expect
        .poll(
          () =>
            client.call('getArchivedPost', { postId: reply.id }).then(
              (answer) => answer.post,
              () => undefined,
            ),
          { timeout: 1_000, interval: 20 },
        )
        .toMatchObject({
          replyTo: first.id,
          threadId: first.id,
          replyToAgentId: scout,
          agentName: 'ada',
        });
      const kept = await client.call('getArchivedPost', { postId: first.id });
      expect(kept.post).toMatchObject({ text: first.text, mentions: [{ agentId: ada, agentName: 'ada' }], replyCount: 1, createdAt: first.createdAt });
      const status = await client.call('getRecordStatus', {});
      expect(status).toMatchObject({ newestId: reply.id, following: true });
      // What operators watch: the archive's lag, how many posts it kept, how many it holds.
      const metrics = await registry.getMetricsAsJSON();
      const value = (name: string, of = ''): number =>
        metrics.find((metric) => metric.name === name)?.values.find((sample) => of === '' || (sample as { metricName?: string }).metricName === of)?.value ?? 0;
      expect(value('agentroom_record_archive_lag_seconds', 'agentroom_record_archive_lag_seconds_count')).toBeGreaterThanOrEqual(2);
      expect(value('agentroom_record_posts_archived_total')).toBeGreaterThanOrEqual(2);
      expect(value('agentroom_record_posts')).toBeGreaterThanOrEqual(2);
    } finally {
      client.close();
      await running.stop();
    }
  });

  it('erases a post the room removes as the removal comes, and keeps a tombstone the room replays as one', async () => {
    const early = await post(room, await agent(room, 'early'), 'removed before the record starts');
    await room.call('removePost', { postId: early.id, by: 'human' });
    const running = await startRecord(await freshDatabase(postgres), roomProcess.process.address);
    const client = recordClient(running.port);
    try {
      await expect.poll(() => running.archiver.isFollowing, { timeout: 5_000 }).toBe(true);
      const read = (postId: string): Promise<Post__Output | null | undefined> =>
        client.call('getArchivedPost', { postId }).then(
          (answer) => answer.post,
          () => undefined,
        );
      await expect.poll(() => read(early.id), { timeout: 5_000 }).toMatchObject({ text: '', removal: { postId: early.id, by: 'human' } });
      const scout = await agent(room, 'scout');
      const made = await post(room, scout, 'lighthouse contraband');
      await expect.poll(async () => (await read(made.id))?.text, { timeout: 5_000 }).toBe('lighthouse contraband');
      const { post: tombstone } = await room.call('removePost', { postId: made.id, by: 'moderator' });
      await expect.poll(() => read(made.id), { timeout: 5_000 }).toEqual({ ...tombstone, replyCount: 0 });
      const found = await client.call('searchPosts', { q: 'contraband', limit: 10 });
      expect(found.hits).toEqual([]);
      const mine = await client.call('listAgentPosts', { agentId: scout, limit: 10 });
      expect(mine.posts.map((p) => [p.id, p.text, p.removal?.by])).toEqual([[made.id, '', 'moderator']]);
    } finally {
      client.close();
      await running.stop();
    }
  });

  it('a new record keeps what the room already holds, then what comes next, in order and each once', async () => {
    const scout = await agent(room, 'scout');
    const before = await room.call('listPosts', { limit: 50 });
    const running = await startRecord(await freshDatabase(postgres), roomProcess.process.address);
    try {
      const made = [];
      for (let i = 0; i < 30; i += 1) made.push((await post(room, scout, `burst ${i}`)).id);
      const expected = [...before.posts.map((p) => p.id).reverse(), ...made];
      expect((await holdsAll(running.port, expected)).reverse()).toEqual(expected);
    } finally {
      await running.stop();
    }
  });

  it('two replicas: one archives; when it dies, the other takes over within the lease, and every post is kept once', async () => {
    const url = await freshDatabase(postgres);
    const [a, b] = [await startRecord(url, roomProcess.process.address), await startRecord(url, roomProcess.process.address)];
    let survivor: RunningRecord | undefined;
    try {
      await expect.poll(() => a.archiver.isFollowing || b.archiver.isFollowing, { timeout: 5_000 }).toBe(true);
      expect(a.archiver.isFollowing && b.archiver.isFollowing).toBe(false);
      const [victim, other] = a.archiver.isFollowing ? [a, b] : [b, a];
      survivor = other;
      const scout = await agent(room, 'scout');
      const made: string[] = [];
      for (let i = 0; i < 10; i += 1) made.push((await post(room, scout, `before ${i}`)).id);
      await holdsAll(other.port, made);
      // Dies as a killed process would: its lease stays until it lapses.
      await victim.crash();
      for (let i = 0; i < 10; i += 1) made.push((await post(room, scout, `after ${i}`)).id);
      await expect.poll(() => other.archiver.isFollowing, { timeout: 5_000 }).toBe(true);
      const ids = await holdsAll(other.port, made);
      expect(made.filter((id) => !ids.includes(id))).toEqual([]);
      expect(new Set(ids).size).toBe(ids.length);
    } finally {
      await survivor?.stop();
    }
  });

  it('resumes after a restart against a room that starts empty again (the embedded room keeps nothing), and says where it starts from', async () => {
    const url = await freshDatabase(postgres);
    const first = await startRoom();
    let second: Awaited<ReturnType<typeof startRoom>> | undefined;
    try {
      const said = capturedLog();
      let running = await startRecord(url, first.process.address, {}, undefined, said.log);
      await expect.poll(() => running.archiver.isFollowing, { timeout: 5_000 }).toBe(true);
      // A new record keeps the posts the room holds already: it follows from the start, not from the newest post.
      expect(said.messages).toContain(
        'the record starts: no position was stored, so it follows the room from the start of its stream (every post it still holds)',
      );
      const scout = await agent(first.client, 'scout');
      const old = await post(first.client, scout, 'written before the restart');
      await holdsAll(running.port, [old.id]);
      await running.stop();
      first.client.close();
      await first.process.stop();

      second = await startRoom();
      const saidAgain = capturedLog();
      running = await startRecord(url, second.process.address, {}, undefined, saidAgain.log);
      try {
        await expect.poll(() => running.archiver.isFollowing, { timeout: 5_000 }).toBe(true);
        expect(saidAgain.messages).toContain(`the record starts: it follows the room from where it left off, after post ${old.id}`);
        const ada = await agent(second.client, 'ada');
        const fresh = await post(second.client, ada, 'written after the restart');
        expect(await holdsAll(running.port, [fresh.id, old.id])).toEqual([fresh.id, old.id]);
      } finally {
        await running.stop();
      }
    } finally {
      second?.client.close();
      await second?.process.stop();
    }
  });

  it('lets posts older than RECORD_RETENTION_DAYS go, and keeps the rest', async () => {
    const running = await startRecord(
      await freshDatabase(postgres),
      roomProcess.process.address,
      { RECORD_RETENTION_DAYS: '30' },
      { archiver: { leaseMs: 1_000, renewMs: 250, retryMs: 50, maxRetryMs: 250, retentionEveryMs: 100 } },
    );
    try {
      await expect.poll(() => running.archiver.isFollowing, { timeout: 5_000 }).toBe(true);
      const day = 86_400_000;
      const at = (ms: number) => ({
        id: `${ms}-0`,
        agentId: 'a_oldtimer1',
        agentName: 'oldtimer',
        humanLabel: 'h',
        text: 'old',
        via: 'rest' as const,
        createdAt: new Date(ms).toISOString(),
        mentions: [],
      });
      const now = Date.now();
      await running.store.archive([at(now - 40 * day), at(now - 31 * day), at(now - 29 * day)]);
      await expect
        .poll(async () => (await archivedIds(running.port)).filter((id) => Number(id.split('-')[0]) < now - day), { timeout: 5_000 })
        .toEqual([`${now - 29 * day}-0`]);
    } finally {
      await running.stop();
    }
  });
});

describe('a streamed post as the record keeps it', () => {
  const streamed: Post__Output = {
    id: '1765000000000-3',
    agentId: 'a_scout0001',
    agentName: 'scout',
    humanLabel: 'Ada',
    text: 'hello',
    via: 'VIA_A2A',
    createdAt: '2025-12-06T05:46:40.000Z',
    cursor: '',
    replyTo: '',
    threadId: '',
    replyCount: 0,
    mentions: [{ agentId: 'a_atlas0001', agentName: 'atlas' }],
    replyToAgentId: '',
    removal: null,
    mutedFor: [],
    traceparent: '',
  };

  it('keeps the room fields, and no reply fields on a post that answers none', () => {
    expect(archivedPost(streamed)).toEqual({
      id: streamed.id,
      agentId: 'a_scout0001',
      agentName: 'scout',
      humanLabel: 'Ada',
      text: 'hello',
      via: 'a2a',
      createdAt: streamed.createdAt,
      mentions: [{ agentId: 'a_atlas0001', agentName: 'atlas' }],
    });
  });

  it('keeps a post whose via this build does not know, rather than stop the archiver on it', () => {
    // A newer room's enum value arrives as its number (the proto this build has no name for it).
    expect(archivedPost({ ...streamed, via: 9 as unknown as Post__Output['via'] }).via).toBe('rest');
  });
});
