import { SEARCH_QUERY_MAX } from '@agentroom/kit/domain';
import { DomainError } from '@agentroom/kit/problems';
import { describe, expect, it } from 'vitest';
import { parseSearchQuery, tsqueryOf } from '../src/search/query.js';
import { snippetOf } from '../src/search/snippet.js';
import { foldWords, searchDocument, tokenize } from '../src/search/text.js';

// The search language and the folding, without a database: what a query means, and what is refused.

function refusal(q: string): DomainError {
  try {
    parseSearchQuery(q);
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error(`${JSON.stringify(q)} was not refused`);
}

describe('folding', () => {
  it('folds case, accents and compatibility forms, the same for any composition', () => {
    expect(foldWords('Café CAFÉ cafe\u0301 Zoë ÆON naïve ﬁne Ｆｕｌｌ')).toEqual(['cafe', 'cafe', 'cafe', 'zoe', 'æon', 'naive', 'fine', 'full']);
  });

  it('splits words at punctuation, symbols, `_`, `@` and `-`, and keeps digits', () => {
    expect(foldWords('agt_x1 @scout e-mail v2.0 #tag it’s')).toEqual(['agt', 'x1', 'scout', 'e', 'mail', 'v2', '0', 'tag', 'it', 's']);
  });

  it('keeps a CJK run as one word, apart from the Latin around it, and keeps kana voicing and Hangul syllables', () => {
    expect(foldWords('東京タワーへ行く tokyoタワー')).toEqual(['東京タワーへ行く', 'tokyo', 'タワー']);
    expect(foldWords('がぎぐ ｶﾀｶﾅ 한국어')).toEqual(['がぎぐ', 'カタカナ', '한국어']);
  });

  it('indexes a CJK run by its characters and the pairs they start, after the text come the author’s name and id', () => {
    expect(searchDocument({ text: '数据库 ok', agentName: 'Ann', agentId: 'a_x1' })).toBe(
      "'数':1A '数据':1A '据':2A '据库':2A '库':3A 'ok':4A 'ann':6B 'a':8B 'x1':9B",
    );
  });

  it('gathers a word’s positions in one lexeme, whatever its case or accents, and counts code points, not UTF-16 units', () => {
    // An emoji (two units) and a lone surrogate are one code point each, and separate words like any symbol.
    expect(searchDocument({ text: 'Deploy 😀 deploy\uD800x DÉPLOY-2', agentName: 'Deploy Bot', agentId: 'agt_7' })).toBe(
      "'deploy':1A,2A,4A,7B 'x':3A '2':5A 'bot':8B 'agt':10B '7':11B",
    );
    expect(tokenize('a😀Bé数\uDC00c').map(({ text, from }) => [text, from])).toEqual([
      ['a', [0]],
      ['be', [2, 3]],
      ['数', [4]],
      ['c', [6]],
    ]);
  });
});

describe('the query language', () => {
  it('reads words, phrases, exclusions and OR', () => {
    expect(parseSearchQuery('Deploy "rolling update" -Canary')).toEqual([
      { kind: 'words', words: ['deploy'], exclude: false },
      { kind: 'words', words: ['rolling', 'update'], exclude: false },
      { kind: 'words', words: ['canary'], exclude: true },
    ]);
    expect(parseSearchQuery('cat OR dog OR "guinea pig" food')).toEqual([
      { kind: 'anyOf', alternatives: [['cat'], ['dog'], ['guinea', 'pig']] },
      { kind: 'words', words: ['food'], exclude: false },
    ]);
    expect(parseSearchQuery('-"not this" that')).toEqual([
      { kind: 'words', words: ['not', 'this'], exclude: true },
      { kind: 'words', words: ['that'], exclude: false },
    ]);
    // Lower-case `or` is a word; a word with punctuation inside is a phrase of its parts.
    expect(parseSearchQuery('this or that agt_x1')).toEqual([
      { kind: 'words', words: ['this'], exclude: false },
      { kind: 'words', words: ['or'], exclude: false },
      { kind: 'words', words: ['that'], exclude: false },
      { kind: 'words', words: ['agt', 'x1'], exclude: false },
    ]);
  });

  it('reads SQL and tsquery syntax as plain words', () => {
    expect(parseSearchQuery("'; DROP TABLE posts; --")).toEqual([
      { kind: 'words', words: ['drop'], exclude: false },
      { kind: 'words', words: ['table'], exclude: false },
      { kind: 'words', words: ['posts'], exclude: false },
    ]);
    expect(parseSearchQuery('a & b | !c <-> d:*')).toEqual(['a', 'b', 'c', 'd'].map((word) => ({ kind: 'words', words: [word], exclude: false })));
    expect(parseSearchQuery("back\\slash \\\\ 'quote'")).toEqual([
      { kind: 'words', words: ['back', 'slash'], exclude: false },
      { kind: 'words', words: ['quote'], exclude: false },
    ]);
    expect(parseSearchQuery('nul\u0000byte')).toEqual([{ kind: 'words', words: ['nul', 'byte'], exclude: false }]);
  });

  it('builds the tsquery from quoted lexemes only, phrases as chains', () => {
    expect(tsqueryOf(parseSearchQuery('a "b c" -d e OR f'))).toBe("('a') & ('b' <1> 'c') & !('d') & (('e') | ('f'))");
    // A CJK word is its chain of pairs; the next word comes two positions after the last pair.
    expect(tsqueryOf(parseSearchQuery('"数据库 ok" 库'))).toBe("('数据' <1> '据库' <2> 'ok') & ('库')");
  });

  it.each([
    ['', 'empty'],
    ['   \t ', 'empty'],
    ['-spam -"ham and eggs"', 'only leaves words out'],
    ['&& || !!', 'no words to find'],
    ['"unclosed phrase', 'not closed'],
    ['say "hi" and "bye', 'not closed'],
    ['OR cat', 'OR stands between'],
    ['cat OR', 'OR stands between'],
    ['cat OR OR dog', 'OR stands between'],
    ['cat OR -dog', 'OR stands between'],
  ])('refuses %j (%s) as an invalid request on q, with what is expected', (q, says) => {
    const error = refusal(q);
    expect(error.slug).toBe('invalid-request');
    expect(error.status).toBe(400);
    expect(error.detail).toContain(says);
    expect(error.fields.parameter).toBe('q');
    expect(error.fields.expected).toContain('"a phrase"');
  });

  it(`refuses a query longer than ${SEARCH_QUERY_MAX} code points, and takes one that long`, () => {
    const long = refusal('é'.repeat(SEARCH_QUERY_MAX + 1));
    expect(long.detail).toContain(`${SEARCH_QUERY_MAX + 1} characters long`);
    expect(long.fields).toMatchObject({ parameter: 'q', max_length: SEARCH_QUERY_MAX, length: SEARCH_QUERY_MAX + 1 });
    // Counted in code points: an emoji is one, though JavaScript counts two.
    expect(parseSearchQuery(`x ${'😀'.repeat(SEARCH_QUERY_MAX - 2)}`)).toHaveLength(1);
  });
});

describe('snippets', () => {
  const terms = (q: string) => parseSearchQuery(q);
  const marked = ({ snippet, highlights }: { snippet: string; highlights: Array<{ start: number; end: number }> }): string[] =>
    highlights.map(({ start, end }) => [...snippet].slice(start, end).join(''));

  it('is the whole text when short, with every match highlighted in code points', () => {
    const hit = snippetOf('😀 Café au lait, then CAFE noir', terms('cafe'));
    expect(hit.snippet).toBe('😀 Café au lait, then CAFE noir');
    expect(hit.highlights).toEqual([
      { start: 2, end: 6 },
      { start: 21, end: 25 },
    ]);
    expect(marked(hit)).toEqual(['Café', 'CAFE']);
  });

  it('highlights a phrase as one range, and not its words apart', () => {
    const hit = snippetOf('rolling back, then a rolling update', terms('"rolling update"'));
    expect(marked(hit)).toEqual(['rolling update']);
  });

  it('highlights CJK words inside unspaced text', () => {
    const hit = snippetOf('我们今天讨论数据库迁移。', terms('数据库'));
    expect(marked(hit)).toEqual(['数据库']);
  });

  it('cuts a long text around the first match, with "…" where cut, never inside a surrogate pair', () => {
    const text = `${'🙂 word '.repeat(30)}needle here ${'and 🙃 more '.repeat(30)}`;
    const hit = snippetOf(text, terms('needle'));
    expect(hit.snippet.startsWith('…')).toBe(true);
    expect(hit.snippet.endsWith('…')).toBe(true);
    expect([...hit.snippet].length).toBeLessThanOrEqual(162);
    expect(hit.snippet).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
    expect(marked(hit)).toEqual(['needle']);
  });

  it('shows the start of a text matched by its author alone, nothing highlighted', () => {
    const hit = snippetOf('x'.repeat(200), terms('scout'));
    expect(hit.snippet).toBe(`${'x'.repeat(160)}…`);
    expect(hit.highlights).toEqual([]);
  });
});
