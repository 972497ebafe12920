import { randomBytes } from 'node:crypto';
import { CursorSigner } from '@agentroom/kit/http';
import type { LocalPostgres } from '@agentroom/kit/local';
import { DomainError } from '@agentroom/kit/problems';
import { SEARCH_QUERY_MAX } from '@agentroom/kit/domain';
import type { Post__Output, SearchPostsRequest } from '@agentroom/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRecord } from '../src/index.js';
import {
  agent,
  archivedIds,
  CURSOR_SECRET,
  post,
  type RecordClient,
  recordHolds,
  type RoomAndRecord,
  type RoomClient,
  startPostgres,
  startRoomAndRecord,
} from './service-support.js';

/**
 * The RecordService over a real PostgreSQL, following a real room process over gRPC: the room's
 * shapes and cursors (one kind of cursor for both: a room page's cursor pages the record and the
 * other way round), edge's before_id continuation, and search's problems, each naming its parameter.
 */
let postgres: LocalPostgres;
let setup: RoomAndRecord;
let room: RoomClient;
let running: RunningRecord;
let record: RecordClient;
/** The room's posts made here, oldest first: twelve, the eighth answered by four replies. */
const posts: Post__Output[] = [];
let thread: Post__Output;
const replies: Post__Output[] = [];
let scout: string;
let ada: string;

/** The problem a call failed with. */
async function problemOf(call: Promise<unknown>): Promise<DomainError> {
  const error = await call.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof DomainError)) throw new Error(`expected a problem, got ${String(error)}`);
  return error;
}

beforeAll(async () => {
  setup = await startRoomAndRecord(startPostgres().then((started) => (postgres = started)));
  ({ room, running, record } = setup);
  scout = await agent(room, 'scout');
  ada = await agent(room, 'ada');
  for (let i = 0; i < 12; i += 1) {
    posts.push(await post(room, i % 2 === 0 ? scout : ada, `note ${i}: ${i % 3 === 0 ? 'the apple harvest' : 'a pear'} @${ada}`));
  }
  thread = posts[7] as Post__Output;
  for (let i = 0; i < 4; i += 1) replies.push(await post(room, scout, `reply ${i} about the apple`, thread.id));
  await recordHolds(record, posts.length + replies.length);
}, 60_000);

afterAll(async () => {
  await setup?.stop();
  await postgres?.stop();
});

describe('posts in the room shapes', () => {
  it('answers a post as the room does: its fields, mentions and reply count', async () => {
    const [fromRoom, fromRecord] = await Promise.all([room.call('getPost', { postId: thread.id }), record.call('getArchivedPost', { postId: thread.id })]);
    expect(fromRecord.post).toEqual(fromRoom.post);
    expect(fromRecord.post).toMatchObject({ replyCount: 4, via: 'VIA_MCP', mentions: [{ agentId: ada, agentName: 'ada' }] });
    const reply = await record.call('getArchivedPost', { postId: replies[0]?.id ?? '' });
    expect(reply.post).toMatchObject({ replyTo: thread.id, threadId: thread.id, replyToAgentId: thread.agentId, replyCount: 0 });
  });

  it('answers post-not-found for an unknown or malformed id', async () => {
    for (const postId of ['1-0', 'not an id', '']) {
      const problem = await problemOf(record.call('getArchivedPost', { postId }));
      expect(problem.slug).toBe('post-not-found');
      expect(problem.fields).toMatchObject({ parameter: 'post_id' });
    }
  });
});

describe('cursors: one kind for the room and the record', () => {
  it("pages the record from a room page's cursor, and the room from the record's, with the same cursors", async () => {
    const roomFirst = await room.call('listPosts', { limit: 5 });
    const recordFirst = await record.call('listArchivedPosts', { limit: 5 });
    expect(recordFirst.posts).toEqual(roomFirst.posts);
    // Both sign the last post's id with the deployment's secret: the very same string.
    expect(recordFirst.nextCursor).toBe(roomFirst.nextCursor);
    const [recordSecond, roomSecond] = await Promise.all([
      record.call('listArchivedPosts', { limit: 5, cursor: roomFirst.nextCursor }),
      room.call('listPosts', { limit: 5, cursor: recordFirst.nextCursor }),
    ]);
    expect(recordSecond.posts.map((p) => p.id)).toEqual(roomSecond.posts.map((p) => p.id));
    expect(recordSecond.nextCursor).toBe(roomSecond.nextCursor);
    // All of them, newest first, nothing twice.
    expect(await archivedIds(running.port, 7)).toEqual([...posts, ...replies].map((p) => p.id).reverse());
  });

  it("pages a thread's replies with the room's cursor, and the room with the record's", async () => {
    const roomFirst = await room.call('listReplies', { postId: thread.id, limit: 2 });
    const recordFirst = await record.call('listArchivedReplies', { postId: thread.id, limit: 2 });
    expect(recordFirst.posts.map((p) => p.id)).toEqual(replies.slice(0, 2).map((p) => p.id));
    expect(recordFirst.nextCursor).toBe(roomFirst.nextCursor);
    const recordSecond = await record.call('listArchivedReplies', { postId: thread.id, limit: 2, cursor: roomFirst.nextCursor });
    const roomSecond = await room.call('listReplies', { postId: thread.id, limit: 2, cursor: recordFirst.nextCursor });
    expect(recordSecond.posts.map((p) => p.id)).toEqual(replies.slice(2).map((p) => p.id));
    expect(roomSecond.posts.map((p) => p.id)).toEqual(replies.slice(2).map((p) => p.id));
    expect(recordSecond).toMatchObject({ hasMore: false, nextCursor: '' });
  });

  it('refuses a cursor of another secret, of another thread, or of the other list, as invalid-cursor', async () => {
    const foreign = new CursorSigner(randomBytes(32).toString('base64url')).sign({ name: 'posts' }, posts[5]?.id ?? '');
    const repliesCursor = (await record.call('listArchivedReplies', { postId: thread.id, limit: 1 })).nextCursor;
    const ours = new CursorSigner(CURSOR_SECRET);
    for (const call of [
      record.call('listArchivedPosts', { cursor: foreign }),
      record.call('listArchivedPosts', { cursor: repliesCursor }),
      record.call('listArchivedReplies', { postId: posts[2]?.id ?? '', cursor: repliesCursor }),
      record.call('listArchivedReplies', { postId: thread.id, cursor: ours.sign({ name: 'posts' }, posts[3]?.id ?? '') }),
      record.call('listArchivedPosts', { cursor: 'abc' }),
    ]) {
      expect((await problemOf(call)).slug).toBe('invalid-cursor');
    }
  });

  it("continues a short room page from before_id, edge's way past the room's window", async () => {
    const page = await record.call('listArchivedPosts', { limit: 3, beforeId: posts[6]?.id ?? '' });
    expect(page.posts.map((p) => p.id)).toEqual(
      posts
        .slice(3, 6)
        .map((p) => p.id)
        .reverse(),
    );
    // Its next cursor is the one a room page ending with posts[3] carries.
    expect(page.nextCursor).toBe(new CursorSigner(CURSOR_SECRET).sign({ name: 'posts' }, posts[3]?.id ?? ''));
    const rest = await record.call('listArchivedPosts', { limit: 3, beforeId: posts[1]?.id ?? '' });
    expect(rest).toMatchObject({ hasMore: false, nextCursor: '' });
    expect(rest.posts.map((p) => p.id)).toEqual([posts[0]?.id]);
    const problem = await problemOf(record.call('listArchivedPosts', { beforeId: 'yesterday' }));
    expect(problem.slug).toBe('invalid-request');
    expect(problem.fields).toMatchObject({ parameter: 'before_id' });
  });

  it('refuses a limit out of range, naming it', async () => {
    const problem = await problemOf(record.call('listArchivedPosts', { limit: 51 }));
    expect(problem.fields).toMatchObject({ parameter: 'limit' });
  });
});

describe('search', () => {
  const search = (request: SearchPostsRequest) => record.call('searchPosts', request);

  it('finds posts by a word, with a snippet, page after page with its own signed cursor', async () => {
    const expected = [...posts, ...replies].filter((p) => p.text.includes('apple')).map((p) => p.id);
    const found: string[] = [];
    let cursor = '';
    do {
      const page = await search({ q: 'apple', sort: 'SEARCH_SORT_NEWEST', limit: 3, cursor });
      for (const hit of page.hits) {
        expect(hit.snippet.toLowerCase()).toContain('apple');
        found.push(hit.post?.id ?? '');
      }
      cursor = page.nextCursor;
    } while (cursor !== '');
    expect(found).toEqual(expected.reverse());
  });

  it('filters by author, thread and mention', async () => {
    const byAda = await search({ q: 'pear', author: ada, limit: 50 });
    expect(byAda.hits.length).toBeGreaterThan(0);
    expect(byAda.hits.every((hit) => hit.post?.agentId === ada)).toBe(true);
    const inThread = await search({ q: 'apple', thread: thread.id, sort: 'SEARCH_SORT_NEWEST', limit: 50 });
    expect(inThread.hits.map((hit) => hit.post?.id).sort()).toEqual(replies.map((p) => p.id).sort());
    const mentioning = await search({ q: 'note', mentions: ada, limit: 50 });
    expect(mentioning.hits).toHaveLength(posts.length);
  });

  it('binds a cursor to its query, filters and sort: another one is invalid-cursor', async () => {
    const first = await search({ q: 'apple', limit: 2 });
    expect(first.nextCursor).not.toBe('');
    for (const other of [
      { q: 'pear', cursor: first.nextCursor },
      { q: 'apple', sort: 'SEARCH_SORT_NEWEST' as const, cursor: first.nextCursor },
      { q: 'apple', author: scout, cursor: first.nextCursor },
      { q: 'apple', cursor: (await record.call('listArchivedPosts', { limit: 1 })).nextCursor },
    ]) {
      expect((await problemOf(search(other))).slug).toBe('invalid-cursor');
    }
    // The same query, spelled with other spaces, is the same query.
    const second = await search({ q: '  apple ', limit: 2, cursor: first.nextCursor });
    expect(second.hits.map((hit) => hit.post?.id)).not.toContain(first.hits[0]?.post?.id);
  });

  it('refuses bad input as invalid-request naming the parameter, never a failure', async () => {
    const cases: [SearchPostsRequest, string][] = [
      [{ q: '' }, 'q'],
      [{ q: 'a'.repeat(SEARCH_QUERY_MAX + 1) }, 'q'],
      [{ q: 'apple', since: 'last tuesday' }, 'since'],
      [{ q: 'apple', until: '2026-13-01T00:00:00Z' }, 'until'],
      [{ q: 'apple', since: '2026-02-01T00:00:00Z', until: '2026-01-01T00:00:00Z' }, 'until'],
      [{ q: 'apple', author: 'robert"); drop table posts;--' }, 'author'],
      [{ q: 'apple', mentions: 'not an id!' }, 'mentions'],
      [{ q: 'apple', thread: 'the apple thread' }, 'thread'],
      [{ q: 'apple', sort: 7 as unknown as 'SEARCH_SORT_NEWEST' }, 'sort'],
      [{ q: 'apple', limit: 500 }, 'limit'],
    ];
    for (const [request, parameter] of cases) {
      const problem = await problemOf(search(request));
      expect({ parameter, slug: problem.slug, named: problem.fields.parameter }).toEqual({ parameter, slug: 'invalid-request', named: parameter });
    }
  });

  it('takes SQL-looking queries as words', async () => {
    for (const q of ["apple'; DROP TABLE posts; --", 'apple OR 1=1', '"); select pg_sleep(10); --', '%_\\']) {
      const answer = await search({ q }).catch((error: unknown) => error);
      // Words (or a problem about the query), never a failure of the store.
      if (answer instanceof DomainError) expect({ q, slug: answer.slug }).toEqual({ q, slug: 'invalid-request' });
      else expect(answer).toHaveProperty('hits');
    }
    await expect(record.call('getRecordStatus', {})).resolves.toMatchObject({ posts: String(posts.length + replies.length) });
  });
});

describe('status', () => {
  it('says what it holds, its newest post, and that it follows the room', async () => {
    const status = await record.call('getRecordStatus', {});
    expect(status).toMatchObject({ newestId: replies.at(-1)?.id, posts: String(posts.length + replies.length), following: true });
    expect(Number(status.lagMs)).toBeGreaterThanOrEqual(0);
  });
});
