// How the record folds text for search, the same for a post and a query (docs/search.md, docs/decisions.md §33):
// each code point is decomposed (NFKD), lower-cased and stripped of its combining marks, so `Café`,
// `CAFE` and `café` are one word; words are runs of letters and digits; Chinese, Japanese and Korean
// runs, written without spaces, are indexed by overlapping pairs of characters.

/** Han, Hiragana, Katakana and Hangul, with the marks they share (`ー`, `々`): scripts written without spaces between words. */
const CJK = /[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Hangul}]/u;
const WORD = /[\p{L}\p{N}]/u;
/** Combining marks, except the kana voicing marks (`が` stays `が`, not `か`: in Japanese they change the word). */
const MARKS = /(?![\u3099\u309A])\p{M}/gu;

const folded = new Map<string, string>();

/** One code point as search sees it: `É` is `e`, `ﬁ` is `fi`, `ｶ` is `カ`; a lone combining mark is nothing. */
export function foldCodePoint(char: string): string {
  const code = char.charCodeAt(0);
  if (code < 0x80) return code >= 0x41 && code <= 0x5a ? String.fromCharCode(code + 32) : char;
  let fold = folded.get(char);
  if (fold === undefined) {
    // NFC at the end puts back together what NFKD took apart and was kept (Hangul syllables, voiced kana).
    fold = char.normalize('NFKD').toLowerCase().normalize('NFKD').replace(MARKS, '').normalize('NFC');
    // Bounded by the code points in use; a map of a few thousand entries.
    if (folded.size < 100_000) folded.set(char, fold);
  }
  return fold;
}

/** A run of letters and digits of the folded text, and where it came from in the original (code point offsets). */
export interface Token {
  /** The folded word. */
  text: string;
  /** Whether it is a run of Chinese, Japanese or Korean characters (indexed by pairs). */
  cjk: boolean;
  /** For each code point of `text`, the offset of the original code point it came from. */
  from: number[];
}

/** The words of `text`, folded, in order. Punctuation, symbols, `_`, `@` and `-` separate words; so does a change into or out of CJK. */
export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let current: Token | undefined;
  let offset = 0;
  for (let index = 0; index < text.length; index += 1, offset += 1) {
    const code = text.charCodeAt(index);
    // ASCII (most posts are all of it) inline: a letter or digit, lower-cased, is a word's; anything else ends one.
    if (code < 0x80) {
      const lower = code >= 0x41 && code <= 0x5a ? code + 32 : code;
      if ((lower >= 0x61 && lower <= 0x7a) || (lower >= 0x30 && lower <= 0x39)) {
        if (current === undefined || current.cjk) tokens.push((current = { text: '', cjk: false, from: [] }));
        current.text += String.fromCharCode(lower);
        current.from.push(offset);
      } else current = undefined;
      continue;
    }
    // A code point of two UTF-16 units counts as one.
    const char = String.fromCodePoint(text.codePointAt(index) as number);
    index += char.length - 1;
    for (const unit of foldCodePoint(char)) {
      if (!WORD.test(unit)) {
        current = undefined;
        continue;
      }
      const cjk = CJK.test(unit);
      if (current === undefined || current.cjk !== cjk) {
        current = { text: '', cjk, from: [] };
        tokens.push(current);
      }
      current.text += unit;
      current.from.push(offset);
    }
  }
  return tokens;
}

/** The folded words of a piece of a query, as the parser keeps them (SearchTerm's words): a CJK run is one word. */
export function foldWords(text: string): string[] {
  return tokenize(text).map((token) => token.text);
}

/** One lexeme of the search document, at its position, and the code points of the original it covers (end excluded). */
export interface Lexeme {
  lexeme: string;
  position: number;
  start: number;
  end: number;
}

/** Longer lexemes are left out of the document (PostgreSQL refuses a lexeme of 2,048 bytes or more). */
const LEXEME_MAX_BYTES = 2_000;
/** The highest position PostgreSQL keeps in a tsvector. */
export const POSITION_MAX = 16_383;

/** Whether a word fits a lexeme: a UTF-16 unit is at most 3 bytes of UTF-8, so most are known to without counting. */
function fits(word: string): boolean {
  return word.length * 3 <= LEXEME_MAX_BYTES || Buffer.byteLength(word) <= LEXEME_MAX_BYTES;
}

/** Calls `visit` with each lexeme of `text` from `position` on, in order (see {@link lexemesOf}); answers the next free position. */
function visitLexemes(text: string, position: number, visit: (lexeme: string, position: number, start: number, end: number) => void): number {
  let at = position;
  for (const token of tokenize(text)) {
    if (!token.cjk) {
      if (fits(token.text)) visit(token.text, at, token.from[0] as number, (token.from.at(-1) as number) + 1);
      at += 1;
      continue;
    }
    const chars = [...token.text];
    chars.forEach((char, index) => {
      const start = token.from[index] as number;
      visit(char, at + index, start, start + 1);
      const next = chars[index + 1];
      if (next !== undefined) visit(char + next, at + index, start, (token.from[index + 1] as number) + 1);
    });
    at += chars.length;
  }
  return at;
}

/**
 * The lexemes of `text` from `position` on. A word is one lexeme. A CJK run of n ≥ 2 characters
 * takes n positions: at each, its character (so one character is found alone) and the pair it starts
 * (so a word of two or more characters is found inside unspaced text, as a chain of pairs); a lone
 * CJK character is itself. Answers the lexemes and the next free position.
 */
export function lexemesOf(text: string, position = 1): { lexemes: Lexeme[]; next: number } {
  const lexemes: Lexeme[] = [];
  const next = visitLexemes(text, position, (lexeme, at, start, end) => lexemes.push({ lexeme, position: at, start, end }));
  return { lexemes, next };
}

/**
 * What a query word is looked for as: its lexemes with their distance from the first, matching the
 * positions {@link lexemesOf} gives a document (a CJK run of two or more characters as its chain of
 * pairs, the next word two positions after the last pair).
 */
export function phraseOf(words: readonly string[]): Array<{ lexeme: string; offset: number }> {
  const phrase: Array<{ lexeme: string; offset: number }> = [];
  let at = 0;
  for (const word of words) {
    for (const token of tokenize(word)) {
      const chars = [...token.text];
      if (!token.cjk || chars.length === 1) {
        phrase.push({ lexeme: token.text, offset: at });
        at += 1;
        continue;
      }
      for (let index = 0; index < chars.length - 1; index += 1) phrase.push({ lexeme: `${chars[index]}${chars[index + 1]}`, offset: at + index });
      at += chars.length;
    }
  }
  return phrase;
}

/** A lexeme quoted for tsvector and tsquery input: in quotes, with quotes doubled and backslashes escaped. */
export function quoteLexeme(lexeme: string): string {
  // Lexemes made here hold letters and digits only, so they need no escaping; any other string still gets it.
  if (!lexeme.includes("'") && !lexeme.includes('\\')) return `'${lexeme}'`;
  return `'${lexeme.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
}

/** At most this many positions of one lexeme are kept (PostgreSQL's own limit is 256). */
const POSITIONS_PER_LEXEME = 255;

/**
 * The search document of a post, as tsvector input: its text with weight A, then its author's name
 * and id with weight B, a position apart so that no phrase runs from one into the next. Built here
 * rather than by `to_tsvector`, so PostgreSQL's parser (and the server's locale) never reads the
 * words differently from the query (docs/decisions.md §33).
 */
export function searchDocument(post: { text: string; agentName: string; agentId: string }): string {
  // Each lexeme's positions as tsvector writes them (`1A,10A`), and how many: one entry per lexeme, in order of first use.
  const positions = new Map<string, { list: string; count: number }>();
  const adding =
    (weight: 'A' | 'B') =>
    (lexeme: string, position: number): void => {
      const at = `${Math.min(position, POSITION_MAX)}${weight}`;
      const entry = positions.get(lexeme);
      if (entry === undefined) positions.set(lexeme, { list: at, count: 1 });
      else if (entry.count < POSITIONS_PER_LEXEME) {
        entry.list += `,${at}`;
        entry.count += 1;
      }
    };
  const name = visitLexemes(post.text, 1, adding('A')) + 1;
  visitLexemes(post.agentId, visitLexemes(post.agentName, name, adding('B')) + 1, adding('B'));
  let document = '';
  for (const [lexeme, { list }] of positions) document += `${document === '' ? '' : ' '}${quoteLexeme(lexeme)}:${list}`;
  return document;
}
