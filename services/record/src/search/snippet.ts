import type { SearchTerm } from '../store.js';
import { type Lexeme, lexemesOf, phraseOf } from './text.js';

/** About how long a snippet is, in code points ("…" aside). */
export const SNIPPET_LENGTH = 160;
/** How much of the text before the first match a cut snippet shows. */
const LEAD = 40;
/** How far a cut moves to fall between words rather than inside one. */
const WORD_SLACK = 16;

export interface Snippet {
  snippet: string;
  /** In code points of `snippet`, end excluded, in order, not overlapping. */
  highlights: Array<{ start: number; end: number }>;
}

/** Where in `text` the query's words and phrases to find occur (code points, end excluded), in order and merged. */
export function matchesOf(text: string, terms: readonly SearchTerm[]): Array<{ start: number; end: number }> {
  const { lexemes } = lexemesOf(text);
  const byLexeme = new Map<string, Lexeme[]>();
  const at = new Map<string, Lexeme>();
  for (const lexeme of lexemes) {
    let list = byLexeme.get(lexeme.lexeme);
    if (list === undefined) byLexeme.set(lexeme.lexeme, (list = []));
    list.push(lexeme);
    at.set(`${lexeme.position} ${lexeme.lexeme}`, lexeme);
  }
  const phrases = terms.flatMap((term) => (term.kind === 'anyOf' ? term.alternatives : term.exclude ? [] : [term.words]));
  const ranges: Array<{ start: number; end: number }> = [];
  for (const words of phrases) {
    const [first, ...rest] = phraseOf(words);
    if (first === undefined) continue;
    for (const candidate of byLexeme.get(first.lexeme) ?? []) {
      let end = candidate.end;
      const found = rest.every(({ lexeme, offset }) => {
        const next = at.get(`${candidate.position + offset} ${lexeme}`);
        if (next !== undefined) end = Math.max(end, next.end);
        return next !== undefined;
      });
      if (found) ranges.push({ start: candidate.start, end });
    }
  }
  ranges.sort((a, b) => a.start - b.start || a.end - b.end);
  const merged: Array<{ start: number; end: number }> = [];
  for (const range of ranges) {
    const last = merged.at(-1);
    if (last !== undefined && range.start <= last.end) last.end = Math.max(last.end, range.end);
    else merged.push({ ...range });
  }
  return merged;
}

/**
 * A short excerpt of `text` around the first match of the query, "…" where it was cut, with the
 * matches highlighted. Counted in code points, so a cut never splits a surrogate pair. A post found
 * by its author's name or id alone shows its text from the start, with nothing highlighted.
 */
export function snippetOf(text: string, terms: readonly SearchTerm[]): Snippet {
  const matches = matchesOf(text, terms);
  const chars = [...text];
  if (chars.length <= SNIPPET_LENGTH) return { snippet: text, highlights: matches };
  const first = matches[0];
  let from = first === undefined ? 0 : Math.max(0, Math.min(first.start - LEAD, chars.length - SNIPPET_LENGTH));
  // Start and end between words when a space is near, but never cut into the first match.
  if (from > 0) {
    const space = chars.slice(from, from + WORD_SLACK).findIndex((char) => /\s/u.test(char));
    if (space !== -1 && (first === undefined || from + space < first.start)) from += space + 1;
  }
  let to = Math.min(chars.length, from + SNIPPET_LENGTH);
  if (to < chars.length) {
    const back = chars
      .slice(to - WORD_SLACK, to)
      .reverse()
      .findIndex((char) => /\s/u.test(char));
    if (back !== -1 && (first === undefined || to - back - 1 >= first.end)) to -= back + 1;
  }
  const lead = from > 0 ? '…' : '';
  const shift = lead.length - from;
  return {
    snippet: `${lead}${chars.slice(from, to).join('')}${to < chars.length ? '…' : ''}`,
    highlights: matches
      .filter((match) => match.end > from && match.start < to)
      .map((match) => ({ start: Math.max(match.start, from) + shift, end: Math.min(match.end, to) + shift })),
  };
}
