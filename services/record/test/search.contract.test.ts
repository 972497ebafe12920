import { beforeAll, describe, expect, it } from 'vitest';
import { parseSearchQuery } from '../src/search/query.js';
import { SqlRecordStore } from '../src/store-sql.js';
import type { SearchHit, SearchQuery } from '../src/store.js';
import { BACKENDS, emptied, post, reply, useBackends } from './support.js';

// Search, held by both databases the record runs on: the query language, folding, CJK, filters,
// both sorts with keyset paging, snippets, and SQL-looking input answered as a plain search.
const database = useBackends();

describe.each(BACKENDS)('search on %s', (name) => {
  let store: SqlRecordStore;

  /** The ids of the hits of `q` (newest first unless asked), with filters. */
  async function ids(q: string, extra: Partial<SearchQuery> = {}): Promise<string[]> {
    const page = await store.search({ terms: parseSearchQuery(q), sort: 'newest', limit: 50, ...extra });
    return page.items.map((hit) => hit.post.id);
  }

  /** Every hit of a query, page after page of `limit`, each page resumed after the last hit of the one before. */
  async function everyPage(q: string, sort: 'relevance' | 'newest', limit: number): Promise<SearchHit[][]> {
    const pages: SearchHit[][] = [];
    let after: SearchQuery['after'];
    for (;;) {
      const page = await store.search({ terms: parseSearchQuery(q), sort, limit, ...(after === undefined ? {} : { after }) });
      pages.push(page.items);
      const last = page.items.at(-1);
      if (!page.hasMore || last === undefined) return pages;
      after = { rank: last.rank, id: last.post.id };
    }
  }

  describe('the query language', () => {
    beforeAll(async () => {
      store = await emptied(database(name));
      await store.archive([
        post('100-0', 'The quick brown fox jumps over the lazy dog'),
        post('101-0', 'A quick fox, not brown at all'),
        post('102-0', 'brown quick dogs sleep'),
        post('103-0', 'Cats are lazy; the cat sleeps'),
        post('104-0', 'My dog chases the cat'),
        post('105-0', 'e-mail the admin at ops@example.org'),
      ]);
    });

    it('finds the posts with every word, in any order', async () => {
      expect(await ids('quick brown')).toEqual(['102-0', '101-0', '100-0']);
      expect(await ids('QUICK Brown fox')).toEqual(['101-0', '100-0']);
      expect(await ids('giraffe')).toEqual([]);
    });

    it('finds a phrase only with its words next to each other, in order', async () => {
      expect(await ids('"quick brown"')).toEqual(['100-0']);
      expect(await ids('"brown quick"')).toEqual(['102-0']);
      expect(await ids('"quick fox"')).toEqual(['101-0']);
    });

    it('leaves out posts with an excluded word or phrase', async () => {
      expect(await ids('quick -lazy')).toEqual(['102-0', '101-0']);
      expect(await ids('quick -"brown fox"')).toEqual(['102-0', '101-0']);
    });

    it('finds either side of OR', async () => {
      expect(await ids('fox OR cat')).toEqual(['104-0', '103-0', '101-0', '100-0']);
      expect(await ids('dog OR cats sleeps')).toEqual(['103-0']);
      expect(await ids('"lazy dog" OR "quick fox"')).toEqual(['101-0', '100-0']);
    });

    it('finds a word written with punctuation inside as the phrase of its parts', async () => {
      expect(await ids('e-mail')).toEqual(['105-0']);
      expect(await ids('ops@example.org')).toEqual(['105-0']);
      expect(await ids('"mail the admin"')).toEqual(['105-0']);
    });

    it('answers SQL and tsquery syntax as a plain search of its words, and the table stays', async () => {
      await store.archive([post('106-0', 'Never DROP TABLE posts in production')]);
      expect(await ids("'; DROP TABLE posts; --")).toEqual(['106-0']);
      expect(await ids('quick & brown | !fox <-> dog')).toEqual(['100-0']);
      expect(await ids("\\quick\\ \\\\ brown'")).toEqual(['102-0', '101-0', '100-0']);
      // A NUL separates words as punctuation does: inside a bare word, it makes a phrase of its parts.
      expect(await ids('quick\u0000brown')).toEqual(['100-0']);
      expect(await ids('quick \u0000 brown')).toEqual(['102-0', '101-0', '100-0']);
      expect(await ids('quick', { author: "a_scout0001' OR '1'='1" })).toEqual([]);
      expect(await ids('quick', { author: 'a_scout\u00000001', mentions: '\u0000', thread: '1-1\u0000' })).toEqual([]);
      expect((await store.status()).posts).toBe(7);
    });
  });

  it('folds accents and case the same on posts and queries', async () => {
    store = await emptied(database(name));
    await store.archive([post('200-0', 'Un café crème, s’il vous plaît'), post('201-0', 'Zoë ordered a CAFE'), post('202-0', 'Ångström naïve résumé')]);
    expect(await ids('cafe')).toEqual(['201-0', '200-0']);
    expect(await ids('CAFÉ')).toEqual(['201-0', '200-0']);
    expect(await ids('zoe')).toEqual(['201-0']);
    expect(await ids('ZOË')).toEqual(['201-0']);
    expect(await ids('angstrom naive resume')).toEqual(['202-0']);
    expect(await ids('"creme s il"')).toEqual(['200-0']);
  });

  it('finds Chinese, Japanese and Korean words inside text written without spaces', async () => {
    store = await emptied(database(name));
    await store.archive([
      post('300-0', '我们今天讨论数据库迁移的问题。'),
      post('301-0', '昨日、東京タワーに行きました！'),
      post('302-0', '데이터베이스를사용합니다'),
      post('303-0', '数据分析很重要'),
      post('304-0', 'Visiting 東京 next week'),
    ]);
    expect(await ids('数据库')).toEqual(['300-0']);
    expect(await ids('数据')).toEqual(['303-0', '300-0']);
    expect(await ids('迁移')).toEqual(['300-0']);
    expect(await ids('库')).toEqual(['300-0']);
    expect(await ids('タワー')).toEqual(['301-0']);
    expect(await ids('東京')).toEqual(['304-0', '301-0']);
    expect(await ids('"東京タワー"')).toEqual(['301-0']);
    expect(await ids('데이터베이스')).toEqual(['302-0']);
    expect(await ids('"東京 next"')).toEqual(['304-0']);
    expect(await ids('数据 -库')).toEqual(['303-0']);
    // Pairs in the wrong order are not the word.
    expect(await ids('库据数')).toEqual([]);
  });

  it('finds posts by their author’s name and id, ranked below posts that say it', async () => {
    store = await emptied(database(name));
    await store.archive([
      post('400-0', 'status report', { agentId: 'a_orion00042', agentName: 'Orion Bot' }),
      post('401-0', 'I asked orion about it'),
      post('402-0', 'nothing to see', { agentId: 'a_vega000007', agentName: 'Vega' }),
    ]);
    expect(await ids('orion')).toEqual(['401-0', '400-0']);
    expect(await ids('"orion bot"')).toEqual(['400-0']);
    expect(await ids('a_orion00042')).toEqual(['400-0']);
    expect(await ids('a_vega000007 nothing')).toEqual(['402-0']);
    // The text is ranked above the author: weight A against B.
    const page = await store.search({ terms: parseSearchQuery('orion'), sort: 'relevance', limit: 10 });
    expect(page.items.map((hit) => hit.post.id)).toEqual(['401-0', '400-0']);
    // No phrase runs from the text into the author's name.
    expect(await ids('"report orion"')).toEqual([]);
  });

  it('filters by author, time, thread and mention', async () => {
    store = await emptied(database(name));
    const reader = [{ agentId: 'a_reader0001', agentName: 'reader' }];
    await store.archive([
      post('1000-0', 'deploy plan', { agentId: 'a_other00001', agentName: 'other' }),
      post('2000-0', 'deploy today?', { mentions: reader }),
      reply('3000-0', 'deploy done', '2000-0'),
      reply('4000-0', 'deploy verified', '3000-0', '2000-0', { agentId: 'a_other00001', agentName: 'other', mentions: reader }),
      post('5000-0', 'deploy again'),
    ]);
    expect(await ids('deploy')).toEqual(['5000-0', '4000-0', '3000-0', '2000-0', '1000-0']);
    expect(await ids('deploy', { author: 'a_other00001' })).toEqual(['4000-0', '1000-0']);
    expect(await ids('deploy', { sinceMs: 2000 })).toEqual(['5000-0', '4000-0', '3000-0', '2000-0']);
    expect(await ids('deploy', { untilMs: 3000 })).toEqual(['2000-0', '1000-0']);
    expect(await ids('deploy', { sinceMs: 2000, untilMs: 4000 })).toEqual(['3000-0', '2000-0']);
    expect(await ids('deploy', { thread: '2000-0' })).toEqual(['4000-0', '3000-0', '2000-0']);
    expect(await ids('deploy', { thread: 'bogus' })).toEqual([]);
    expect(await ids('deploy', { mentions: 'a_reader0001' })).toEqual(['4000-0', '2000-0']);
    expect(await ids('deploy', { mentions: 'a_reader0001', author: 'a_scout0001' })).toEqual(['2000-0']);
    expect(await ids('deploy', { mentions: 'a_nobody0001' })).toEqual([]);
    // Instants beyond any date are no error: every post is after the earliest and before the latest.
    expect(await ids('deploy', { sinceMs: -1e300, untilMs: 1e300 })).toHaveLength(5);
    expect(await ids('deploy', { sinceMs: 1e300 })).toEqual([]);
  });

  describe('sorts and pages', () => {
    const total = 23;
    beforeAll(async () => {
      store = await emptied(database(name));
      // Ranks in few groups with many ties (the same text), so that paging must break ties by id; some
      // found by their author's name only, whose rank (0.4 as float4) is no exact double.
      await store.archive(
        Array.from({ length: total }, (_, index) => {
          const texts = ['alpha', 'alpha alpha beta', 'alpha beta alpha beta alpha', 'beta then alpha, and more words around it', 'by name'];
          const text = texts[index % texts.length] as string;
          return post(`${9000 + Math.floor(index / 3)}-${index % 3}`, text, text === 'by name' ? { agentName: 'Alpha' } : {});
        }),
      );
    });

    it('sorts newest first by id, and best first then newest by relevance', async () => {
      const newest = (await store.search({ terms: parseSearchQuery('alpha'), sort: 'newest', limit: 50 })).items;
      expect(newest.map((hit) => hit.post.id)).toEqual(newest.map((hit) => hit.post.id).sort((a, b) => (a < b ? 1 : -1)));
      expect(newest[0]?.post.id).toBe('9007-1');
      const relevance = (await store.search({ terms: parseSearchQuery('alpha'), sort: 'relevance', limit: 50 })).items;
      expect(relevance).toHaveLength(total);
      for (let index = 1; index < relevance.length; index += 1) {
        const [before, hit] = [relevance[index - 1] as SearchHit, relevance[index] as SearchHit];
        expect(before.rank > hit.rank || (before.rank === hit.rank && before.post.id > hit.post.id)).toBe(true);
      }
      expect(relevance[0]?.post.text).toBe('alpha beta alpha beta alpha');
      expect(relevance.at(-1)?.post.text).toBe('by name');
    });

    it.each(['relevance', 'newest'] as const)('pages through every hit sorted by %s, each once, in order', async (sort) => {
      const all = (await store.search({ terms: parseSearchQuery('alpha'), sort, limit: 50 })).items.map((hit) => hit.post.id);
      for (const limit of [1, 2, 5]) {
        const pages = await everyPage('alpha', sort, limit);
        expect(pages.slice(0, -1).every((page) => page.length === limit)).toBe(true);
        expect(pages.flat().map((hit) => hit.post.id)).toEqual(all);
      }
    });
  });

  it('ranks the newest matches only, however many a query has, and still lists every match by newest', async () => {
    await emptied(database(name));
    store = new SqlRecordStore({ write: database(name), rankedMax: 3 });
    // The oldest post is the best match by far, but four newer ones match too.
    await store.archive([post('700-0', 'omega omega omega omega omega'), ...[1, 2, 3, 4].map((index) => post(`${700 + index}-0`, `omega and ${index}`))]);
    const pages = await everyPage('omega', 'relevance', 2);
    expect(pages.flat().map((hit) => hit.post.id)).toEqual(['704-0', '703-0', '702-0']);
    expect(await ids('omega')).toEqual(['704-0', '703-0', '702-0', '701-0', '700-0']);
    // Narrowed to fewer matches, the best one is ranked again.
    const narrowed = await store.search({ terms: parseSearchQuery('omega'), sort: 'relevance', limit: 5, untilMs: 703 });
    expect(narrowed.items.map((hit) => hit.post.id)).toEqual(['700-0', '702-0', '701-0']);
  });

  it('finds the same newest matches whichever way it reaches past the window of newest posts', async () => {
    const base = await emptied(database(name));
    // 40 posts, most matching (a common word) and a few matching a rare one, some within a time range.
    const texts = Array.from({ length: 40 }, (_, index) =>
      index % 13 === 0 ? `rare lantern ${index}` : index % 4 === 0 ? `quiet ${index}` : `common ${index}`,
    );
    await base.archive(texts.map((text, index) => post(`${800 + index}-0`, index % 5 === 0 ? `${text} common common` : text)));
    const expected = (word: string, fromMs = 0, untilMs = Infinity): string[] =>
      texts
        .map((text, index) => ({ id: `${800 + index}-0`, words: `${text}${index % 5 === 0 ? ' common common' : ''}`.split(' '), ms: 800 + index }))
        .filter(({ words, ms }) => words.includes(word) && ms >= fromMs && ms < untilMs)
        .map(({ id }) => id)
        .reverse();
    // A window of 3 posts, then walking on by key (fetching costs more than any walk) or through the word index (fetching costs nothing).
    for (const fetchCost of [1e9, 0]) {
      store = new SqlRecordStore({ write: database(name), rankedMax: 6, searchWindow: 3, fetchCost });
      for (const word of ['common', 'lantern', 'quiet']) {
        expect((await everyPage(word, 'newest', 4)).flat().map((hit) => hit.post.id)).toEqual(expected(word));
        const ranked = (await everyPage(word, 'relevance', 4)).flat();
        expect(ranked.map((hit) => hit.post.id).sort()).toEqual(expected(word).slice(0, 6).sort());
      }
      expect(await ids('common', { sinceMs: 810, untilMs: 830 })).toEqual(expected('common', 810, 830));
      // The one post of the newest six that says it three times ranks first; the rest follow newest first.
      const best = (await store.search({ terms: parseSearchQuery('common'), sort: 'relevance', limit: 6 })).items.map((hit) => hit.post.id);
      const thrice = expected('common')
        .slice(0, 6)
        .filter((id) => Number(id.split('-')[0]) % 5 === 0);
      expect(thrice).toHaveLength(1);
      expect(best).toEqual([
        ...thrice,
        ...expected('common')
          .slice(0, 6)
          .filter((id) => !thrice.includes(id)),
      ]);
    }
  });

  it('answers each hit with a snippet of its text and the matches highlighted', async () => {
    store = await emptied(database(name));
    const long = `${'Some 🙂 words before it. '.repeat(12)}Here the Rolling Update went wrong. ${'More words after it. '.repeat(12)}`;
    await store.archive([post('600-0', long), post('601-0', 'A rolling update, short')]);
    const [first, second] = (await store.search({ terms: parseSearchQuery('"rolling update"'), sort: 'newest', limit: 10 })).items;
    expect(first?.snippet).toBe('A rolling update, short');
    expect(first?.highlights).toEqual([{ start: 2, end: 16 }]);
    expect(second?.snippet.startsWith('…')).toBe(true);
    expect(second?.snippet.endsWith('…')).toBe(true);
    const { start, end } = second?.highlights[0] ?? { start: 0, end: 0 };
    expect([...(second?.snippet ?? '')].slice(start, end).join('')).toBe('Rolling Update');
  });
});
