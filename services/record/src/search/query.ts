import { codePointLength, SEARCH_QUERY_MAX } from '@agentroom/kit/domain';
import { DomainError } from '@agentroom/kit/problems';
import type { SearchTerm } from '../store.js';
import { foldWords, phraseOf, quoteLexeme } from './text.js';

/** What a valid `q` looks like, for every refusal's remedy. */
export const QUERY_EXPECTED = `words to find, "a phrase", -word to leave out, a OR b for either; at least one word or phrase to find, at most ${SEARCH_QUERY_MAX} characters`;

function invalid(detail: string, extra: { length?: number } = {}): DomainError {
  return new DomainError('invalid-request', {
    detail,
    fields: { parameter: 'q', expected: QUERY_EXPECTED, ...(extra.length === undefined ? {} : { max_length: SEARCH_QUERY_MAX, length: extra.length }) },
  });
}

type Item = { kind: 'or' } | { kind: 'term'; words: string[]; exclude: boolean };

/** The query's pieces in order: quoted phrases, bare words (a bare word folds to one or more words: `agt_x1` is `agt x1`), and OR. */
function lex(q: string): Item[] {
  const items: Item[] = [];
  const chars = [...q];
  let index = 0;
  while (index < chars.length) {
    const char = chars[index] as string;
    if (/\s/u.test(char)) {
      index += 1;
      continue;
    }
    let exclude = false;
    if (char === '-' && index + 1 < chars.length && !/\s/u.test(chars[index + 1] as string)) {
      exclude = true;
      index += 1;
    }
    if (chars[index] === '"') {
      const close = chars.indexOf('"', index + 1);
      if (close === -1) throw invalid('The query has a double quote (") that is not closed: a phrase is written between two double quotes, "like this".');
      const words = foldWords(chars.slice(index + 1, close).join(''));
      if (words.length > 0) items.push({ kind: 'term', words, exclude });
      index = close + 1;
      continue;
    }
    let end = index;
    while (end < chars.length && chars[end] !== '"' && !/\s/u.test(chars[end] as string)) end += 1;
    const bare = chars.slice(index, end).join('');
    index = end;
    if (bare === 'OR' && !exclude) {
      items.push({ kind: 'or' });
      continue;
    }
    // Punctuation and symbols alone (`&`, `|`, `--`) are no words: nothing to find, nothing refused.
    const words = foldWords(bare);
    if (words.length > 0) items.push({ kind: 'term', words, exclude });
  }
  return items;
}

/**
 * Parses a query of the room's search language (docs/search.md): words and "phrases" that must all
 * be found, -words and -"phrases" that must not, and `OR` between two of them for either. Every word
 * is folded as the record folds text. A query that cannot be searched is an `invalid-request` naming
 * `q`, with what a valid one looks like: empty, too long, an unclosed quote, OR out of place, or
 * nothing to find but exclusions.
 */
export function parseSearchQuery(q: string): SearchTerm[] {
  const length = codePointLength(q);
  if (length > SEARCH_QUERY_MAX) throw invalid(`The query is ${length} characters long; a query holds at most ${SEARCH_QUERY_MAX}.`, { length });
  if (q.trim() === '') throw invalid('The query is empty: give a word or phrase to find.');
  const items = lex(q);
  const terms: SearchTerm[] = [];
  const misplacedOr = 'OR stands between two words or phrases to find (cat OR dog): not first, not last, not twice in a row, and not next to a -word.';
  for (let index = 0; index < items.length; index += 1) {
    const item = items[index] as Item;
    if (item.kind === 'or') throw invalid(misplacedOr);
    if (items[index + 1]?.kind !== 'or') {
      terms.push({ kind: 'words', words: item.words, exclude: item.exclude });
      continue;
    }
    // A run `a OR b OR c`: one term, any of whose alternatives matches.
    const alternatives: string[][] = [];
    let next: Item | undefined = item;
    for (;;) {
      if (next?.kind !== 'term' || next.exclude) throw invalid(misplacedOr);
      alternatives.push(next.words);
      if (items[index + 1]?.kind !== 'or') break;
      index += 2;
      next = items[index];
    }
    terms.push({ kind: 'anyOf', alternatives });
  }
  if (terms.length === 0) throw invalid('The query has no words to find: punctuation and symbols alone are not searched.');
  if (terms.every((term) => term.kind === 'words' && term.exclude)) {
    throw invalid('The query only leaves words out (-word): add a word or phrase to find.');
  }
  return terms;
}

/** A phrase as tsquery input: its lexemes chained by their distances (`'a' <-> 'b'`, `'東京' <2> 'tower'`). */
function chain(words: readonly string[]): string {
  const phrase = phraseOf(words);
  return phrase
    .map(({ lexeme, offset }, index) => {
      const previous = phrase[index - 1];
      return previous === undefined ? quoteLexeme(lexeme) : ` <${offset - previous.offset}> ${quoteLexeme(lexeme)}`;
    })
    .join('');
}

/**
 * The parsed query as tsquery input, every lexeme quoted here (cast with `::tsquery`, never parsed
 * from the user's text): terms joined by `&`, exclusions negated, alternatives joined by `|`.
 */
export function tsqueryOf(terms: readonly SearchTerm[]): string {
  return terms
    .map((term) => {
      if (term.kind === 'anyOf') return `(${term.alternatives.map((words) => `(${chain(words)})`).join(' | ')})`;
      return term.exclude ? `!(${chain(term.words)})` : `(${chain(term.words)})`;
    })
    .join(' & ');
}
