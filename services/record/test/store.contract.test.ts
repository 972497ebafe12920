import { describe, expect, it } from 'vitest';
import type { SqlRecordStore } from '../src/store-sql.js';
import type { ArchivedPost } from '../src/store.js';
import { BACKENDS, emptied, post, reply, useBackends } from './support.js';

// The record's store contract, held by both databases it runs on: a real PostgreSQL 15 and PGlite.
const database = useBackends();

/** Every page of a list, following `next` until it says there is no more. */
async function allPages<T>(
  first: () => Promise<{ items: T[]; hasMore: boolean }>,
  next: (last: T) => Promise<{ items: T[]; hasMore: boolean }>,
): Promise<T[][]> {
  const pages: T[][] = [];
  let page = await first();
  pages.push(page.items);
  while (page.hasMore) {
    const last = page.items.at(-1);
    if (last === undefined) throw new Error('a page with more after it is empty');
    page = await next(last);
    pages.push(page.items);
  }
  return pages;
}

describe.each(BACKENDS)('the record store on %s', (name) => {
  let store: SqlRecordStore;
  const fresh = async (): Promise<SqlRecordStore> => (store = await emptied(database(name)));

  it('keeps a post with every field the room gave it, and reads it back by id', async () => {
    await fresh();
    const made = post('1765000000123-4', 'Hello @reader, bonjour à tous', {
      agentName: 'Scout Ünal',
      humanLabel: 'Ada L.',
      via: 'mcp',
      mentions: [{ agentId: 'a_reader0001', agentName: 'reader' }],
    });
    expect(await store.archive([made])).toBe(1);
    expect(await store.getPost('1765000000123-4')).toEqual({ ...made, createdAt: '2025-12-06T05:46:40.123Z' });
    expect(await store.getPost('1765000000123-5')).toBeUndefined();
    expect(await store.getPost('not-an-id')).toBeUndefined();
    expect(await store.getPost("1-1'; DROP TABLE posts; --")).toBeUndefined();
  });

  it('lists newest first in the order of the room, numerically by time then sequence', async () => {
    await fresh();
    // As text these sort otherwise ('999-0' after '1000-0', '1000-10' before '1000-2').
    const ids = ['999-0', '1000-2', '1000-10', '10000-0', '10000-1'];
    await store.archive(ids.map((id) => post(id, `post ${id}`)));
    const page = await store.listPosts(10);
    expect(page.items.map((item) => item.id)).toEqual([...ids].reverse());
    expect(page.hasMore).toBe(false);
    expect((await store.listPosts(10, '1000-10')).items.map((item) => item.id)).toEqual(['1000-2', '999-0']);
  });

  it('pages through every post with beforeId, each once, hasMore true until the last page', async () => {
    await fresh();
    const ids = Array.from({ length: 7 }, (_, index) => `${2000 + index}-0`);
    await store.archive(ids.map((id) => post(id, id)));
    const pages = await allPages(
      () => store.listPosts(3),
      (last) => store.listPosts(3, last.id),
    );
    expect(pages.map((page) => page.length)).toEqual([3, 3, 1]);
    expect(pages.flat().map((item) => item.id)).toEqual([...ids].reverse());
  });

  it('is idempotent by post id: the same batch twice keeps each post once and counts each reply once', async () => {
    await fresh();
    const batch = [post('3000-0', 'first'), reply('3001-0', 'a reply', '3000-0'), reply('3002-0', 'another', '3001-0', '3000-0')];
    expect(await store.archive(batch)).toBe(3);
    expect(await store.archive(batch)).toBe(0);
    // Overlapping: one new post after two kept ones.
    expect(await store.archive([...batch.slice(1), reply('3003-0', 'third', '3000-0')])).toBe(1);
    expect((await store.getPost('3000-0'))?.replyCount).toBe(3);
    expect(await store.status()).toEqual({ newestId: '3003-0', posts: 4 });
    expect((await store.listPosts(10)).items).toHaveLength(4);
  });

  it('counts a thread’s replies on its first post only, and lists them oldest first', async () => {
    await fresh();
    await store.archive([post('4000-0', 'question')]);
    await store.archive([reply('4001-0', 'answer', '4000-0'), post('4001-1', 'unrelated'), reply('4002-0', 'answer to the answer', '4001-0', '4000-0')]);
    const head = await store.getPost('4000-0');
    expect(head?.replyCount).toBe(2);
    const answer = await store.getPost('4001-0');
    expect(answer).toMatchObject({ replyTo: '4000-0', threadId: '4000-0', replyToAgentId: 'a_scout0001' });
    expect(answer?.replyCount).toBeUndefined();
    expect((await store.getPost('4001-1'))?.replyCount).toBeUndefined();
    expect((await store.listPosts(10)).items.find((item) => item.id === '4000-0')?.replyCount).toBe(2);
    const replies = await store.listReplies('4000-0', 10);
    expect(replies?.items.map((item) => item.id)).toEqual(['4001-0', '4002-0']);
    expect(replies?.hasMore).toBe(false);
    // A reply starts no thread; an unknown or malformed id is no thread at all.
    expect(await store.listReplies('4001-0', 10)).toEqual({ items: [], hasMore: false });
    expect(await store.listReplies('4001-1', 10)).toEqual({ items: [], hasMore: false });
    expect(await store.listReplies('4999-0', 10)).toBeUndefined();
    expect(await store.listReplies('nope', 10)).toBeUndefined();
  });

  it('pages a thread’s replies with afterId, each once', async () => {
    await fresh();
    const replies = Array.from({ length: 5 }, (_, index) => reply(`${5001 + index}-0`, `reply ${index}`, '5000-0'));
    await store.archive([post('5000-0', 'thread'), ...replies, post('5100-0', 'after')]);
    const pages = await allPages(
      async () => (await store.listReplies('5000-0', 2)) ?? { items: [], hasMore: false },
      async (last) => (await store.listReplies('5000-0', 2, last.id)) ?? { items: [], hasMore: false },
    );
    expect(pages.map((page) => page.length)).toEqual([2, 2, 1]);
    expect(pages.flat().map((item) => item.id)).toEqual(replies.map((item) => item.id));
  });

  it('caps every page, whatever limit is asked', async () => {
    await fresh();
    await store.archive(Array.from({ length: 120 }, (_, index) => post(`${6000 + index}-0`, `p${index}`)));
    const page = await store.listPosts(1_000_000);
    expect(page.items).toHaveLength(100);
    expect(page.hasMore).toBe(true);
    expect((await store.listPosts(0)).items).toHaveLength(1);
  });

  it('drops the posts made before an instant, and says how many went', async () => {
    await fresh();
    await store.archive([post('7000-0', 'old'), post('7000-1', 'old too'), reply('8000-0', 'new', '7000-0'), post('9000-0', 'newer')]);
    expect(await store.dropBefore(8000)).toBe(2);
    expect((await store.listPosts(10)).items.map((item) => item.id)).toEqual(['9000-0', '8000-0']);
    expect(await store.getPost('7000-0')).toBeUndefined();
    expect(await store.status()).toEqual({ newestId: '9000-0', posts: 2 });
    expect(await store.dropBefore(8000)).toBe(0);
  });

  it('reports its newest post and how many it keeps, and answers a ping', async () => {
    await fresh();
    expect(await store.status()).toEqual({ posts: 0 });
    await store.archive([post('10-0', 'a'), post('11-0', 'b')]);
    expect(await store.status()).toEqual({ newestId: '11-0', posts: 2 });
    await expect(store.ping()).resolves.toBeUndefined();
    expect(store.kind).toBe(name);
  });

  describe('the follower’s lease and position', () => {
    it('lets one owner hold the lease at a time, extends it for its holder, and hands it over on release', async () => {
      await fresh();
      expect(await store.acquireLease('one', 10_000)).toBe(true);
      expect(await store.acquireLease('two', 10_000)).toBe(false);
      expect(await store.acquireLease('one', 10_000)).toBe(true);
      await store.releaseLease('two'); // not its lease: nothing changes
      expect(await store.acquireLease('two', 10_000)).toBe(false);
      await store.releaseLease('one');
      expect(await store.acquireLease('two', 10_000)).toBe(true);
    });

    it('lets a lease lapse when not extended in time', async () => {
      await fresh();
      expect(await store.acquireLease('one', 100)).toBe(true);
      expect(await store.acquireLease('two', 100)).toBe(false);
      await new Promise((resolve) => setTimeout(resolve, 250));
      expect(await store.advancePosition('one', '1-0')).toBe(false);
      expect(await store.acquireLease('two', 10_000)).toBe(true);
    });

    it('moves the position only for the lease’s holder, and never backwards', async () => {
      await fresh();
      expect(await store.position()).toBeUndefined();
      expect(await store.advancePosition('one', '100-0')).toBe(false);
      expect(await store.position()).toBeUndefined();
      await store.acquireLease('one', 10_000);
      expect(await store.advancePosition('two', '100-0')).toBe(false);
      expect(await store.advancePosition('one', '999-5')).toBe(true);
      expect(await store.position()).toBe('999-5');
      // Numerically, as the room orders ids: 1000-0 is after 999-5, and 999-10 after 999-5.
      expect(await store.advancePosition('one', '999-10')).toBe(true);
      expect(await store.position()).toBe('999-10');
      expect(await store.advancePosition('one', '1000-0')).toBe(true);
      expect(await store.advancePosition('one', '999-99')).toBe(true);
      expect(await store.position()).toBe('1000-0');
    });

    it('keeps a batch and moves the position past it in one step (archiveAndAdvance), only for the lease’s holder and never backwards', async () => {
      await fresh();
      const batch = [post('13000-0', 'question'), reply('13000-1', 'answer', '13000-0'), reply('13001-0', 'thanks', '13000-1', '13000-0')];
      // Without the lease the posts are kept all the same (a repeat changes nothing), but the position stays.
      expect(await store.archiveAndAdvance('one', batch.slice(0, 1))).toEqual({ kept: 1, held: false });
      expect(await store.position()).toBeUndefined();
      await store.acquireLease('one', 10_000);
      expect(await store.archiveAndAdvance('one', batch)).toEqual({ kept: 2, held: true });
      expect(await store.position()).toBe('13001-0');
      expect((await store.getPost('13000-0'))?.replyCount).toBe(2);
      expect(await store.status()).toEqual({ newestId: '13001-0', posts: 3 });
      // Handed over again: nothing new, nothing counted twice, and the position does not go back.
      expect(await store.archiveAndAdvance('one', batch.slice(0, 2))).toEqual({ kept: 0, held: true });
      expect(await store.position()).toBe('13001-0');
      expect((await store.getPost('13000-0'))?.replyCount).toBe(2);
      expect(await store.archiveAndAdvance('two', [reply('13002-0', 'late', '13000-0')])).toEqual({ kept: 1, held: false });
      expect(await store.position()).toBe('13001-0');
      expect(await store.archiveAndAdvance('one', [])).toEqual({ kept: 0, held: true });
      // A thread id that is no post id counts nowhere, and does not fail the batch.
      expect(
        await store.archiveAndAdvance('one', [
          reply('13003-0', 'odd', '13000-0', '1-1; DROP TABLE posts'),
          reply('13004-0', 'big', '13000-0', `${'9'.repeat(20)}-0`),
        ]),
      ).toEqual({ kept: 2, held: true });
      expect(await store.position()).toBe('13004-0');
      expect((await store.getPost('13000-0'))?.replyCount).toBe(3);
      expect(await store.status()).toEqual({ newestId: '13004-0', posts: 6 });
    });
  });

  it('keeps a post holding what PostgreSQL cannot store (NUL, a lone surrogate) with U+FFFD in its place, and the batch goes through', async () => {
    await fresh();
    const odd = post('12000-0', 'nul\u0000here and \uD83D alone', { agentName: 'bad\uDC00name', mentions: [{ agentId: 'a_x\u0000', agentName: 'x' }] });
    expect(await store.archive([odd, post('12000-1', 'fine')])).toBe(2);
    expect(await store.getPost('12000-0')).toMatchObject({
      text: 'nul\uFFFDhere and \uFFFD alone',
      agentName: 'bad\uFFFDname',
      mentions: [{ agentId: 'a_x\uFFFD', agentName: 'x' }],
    });
  });

  it('keeps posts whose text looks like SQL as text', async () => {
    await fresh();
    const texts = ["'; DROP TABLE posts; --", 'a & b | !c <-> d', 'back\\slash \\\\ and $1 and :1A', '"quoted" \'single\''];
    const made: ArchivedPost[] = texts.map((text, index) => post(`${11000 + index}-0`, text));
    await store.archive(made);
    for (const item of made) expect((await store.getPost(item.id))?.text).toBe(item.text);
  });

  describe('removed posts', () => {
    const AT = '2026-03-01T12:00:00.000Z';
    const words = async (q: string): Promise<string[]> =>
      (await store.search({ terms: [{ kind: 'words', words: [q], exclude: false }], sort: 'newest', limit: 50 })).items.map((hit) => hit.post.id);

    it('erases a kept post: text, mentions and search document go, its tombstone, place and thread stay', async () => {
      await fresh();
      const root = post('3000-0', 'the thread starts here');
      const removed = reply('3001-0', 'contraband words for @reader', '3000-0', '3000-0', { mentions: [{ agentId: 'a_reader0001', agentName: 'reader' }] });
      const kept = reply('3002-0', 'a reply that stays', '3001-0', '3000-0');
      await store.archive([root, removed, kept]);
      expect(await words('contraband')).toEqual(['3001-0']);
      expect(await store.erasePost({ postId: '3001-0', by: 'moderator', removedAt: AT })).toBe(true);
      const tombstone = { ...removed, text: '', mentions: [], removal: { postId: '3001-0', by: 'moderator', removedAt: AT } };
      expect(await store.getPost('3001-0')).toEqual(tombstone);
      expect((await store.listPosts(10)).items.map((p) => p.id)).toEqual(['3002-0', '3001-0', '3000-0']);
      expect((await store.listReplies('3000-0', 10))?.items).toEqual([tombstone, kept]);
      expect((await store.getPost('3000-0'))?.replyCount).toBe(2);
      expect(await words('contraband')).toEqual([]);
      const mentioning = await store.search({
        terms: [{ kind: 'words', words: ['words'], exclude: false }],
        mentions: 'a_reader0001',
        sort: 'newest',
        limit: 50,
      });
      expect(mentioning.items).toEqual([]);
      // The bytes are gone from the row itself, not hidden on the way out.
      const [row] = await database(name).query<{ text: string; search: string }>('SELECT text, search::text AS search FROM posts WHERE ms = 3001 AND seq = 0');
      expect(row).toEqual({ text: '', search: '' });
    });

    it('keeps the first removal: erasing again changes nothing', async () => {
      await fresh();
      await store.archive([post('3100-0', 'twice')]);
      await store.erasePost({ postId: '3100-0', by: 'human', removedAt: AT });
      expect(await store.erasePost({ postId: '3100-0', by: 'moderator', removedAt: '2026-03-02T00:00:00.000Z' })).toBe(true);
      expect((await store.getPost('3100-0'))?.removal).toEqual({ postId: '3100-0', by: 'human', removedAt: AT });
    });

    it('erases a post removed before it arrives as it arrives, counted in its thread as any reply', async () => {
      await fresh();
      await store.archive([post('3200-0', 'a thread')]);
      expect(await store.erasePost({ postId: '3201-0', by: 'moderator', removedAt: AT })).toBe(false);
      expect(await store.getPost('3201-0')).toBeUndefined();
      await store.archive([reply('3201-0', 'late contraband', '3200-0')]);
      expect(await store.getPost('3201-0')).toMatchObject({ text: '', mentions: [], removal: { postId: '3201-0', by: 'moderator', removedAt: AT } });
      expect((await store.getPost('3200-0'))?.replyCount).toBe(1);
      expect(await words('contraband')).toEqual([]);
    });

    it("lists one agent's posts newest first, tombstones included, a page at a time", async () => {
      await fresh();
      const ids = ['3300-0', '3301-0', '3302-0', '3303-0', '3304-0'];
      await store.archive(ids.map((id, i) => post(id, `post ${id}`, i % 2 === 0 ? {} : { agentId: 'a_other0001' })));
      await store.erasePost({ postId: '3302-0', by: 'human', removedAt: AT });
      const first = await store.listAgentPosts('a_scout0001', 2);
      expect(first.items.map((p) => [p.id, p.text])).toEqual([
        ['3304-0', 'post 3304-0'],
        ['3302-0', ''],
      ]);
      expect(first.hasMore).toBe(true);
      expect(first.items[1]?.removal?.by).toBe('human');
      const second = await store.listAgentPosts('a_scout0001', 2, '3302-0');
      expect(second).toEqual({ items: [expect.objectContaining({ id: '3300-0' })], hasMore: false });
      expect((await store.listAgentPosts('a_nobody0001', 10)).items).toEqual([]);
    });
  });
});
