import { readdirSync, readFileSync } from 'node:fs';
import {
  BODY_LIMIT_BYTES,
  FEEDBACK_TEXT_MAX,
  IDEMPOTENCY_KEY_HOURS,
  LIMIT_DEFAULT,
  LIMIT_MAX,
  LIMIT_MIN,
  MENTIONS_MAX,
  MESSAGE_TEXT_MAX,
  POST_TEXT_MAX,
  SEARCH_RANKED_MAX,
  SIGNUP_EXPIRES_IN_SECONDS,
  SIGNUP_POLL_INTERVAL_SECONDS,
  WEBHOOK_FAILURES_MAX,
  WEBHOOKS_MAX,
} from '@agentroom/kit/domain';
import { describe, expect, it } from 'vitest';

/**
 * The Markdown docs state the product's limits in prose, which cannot quote kit's constants
 * (services/kit/src/limits.ts): every statement of a limit they make is found here and must give
 * the constant's number, so a limit changed in kit fails this until the docs say the new one.
 */
const root = new URL('../../', import.meta.url);
// docs/ and any folder below it: the README's pages may move there.
const FILES = [
  'README.md',
  ...readdirSync(new URL('docs/', root), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];
/** Each file's text with its line breaks and runs of spaces made one space: a sentence may wrap anywhere. */
const TEXTS = new Map(FILES.map((file) => [file, readFileSync(new URL(file, root), 'utf8').replace(/\s+/g, ' ')]));

/** One way the docs state a limit: the number in the first group, and what it is in kit's units. */
interface Statement {
  pattern: RegExp;
  /** From the stated number to kit's unit (minutes to seconds, KiB to bytes). */
  scale?: number;
}

const LIMITS: Record<string, { value: number; statements: Statement[] }> = {
  SEARCH_RANKED_MAX: {
    value: SEARCH_RANKED_MAX,
    statements: [{ pattern: /ranks the newest (\d[\d,]*) (?:posts that match|matches)/g }, { pattern: /Relevance ranks the newest (\d[\d,]*) matches/g }],
  },
  POST_TEXT_MAX: {
    value: POST_TEXT_MAX,
    statements: [
      { pattern: /Post text: 1 to (\d[\d,]*)/g },
      { pattern: /createPost: `\{text\}` \(1–(\d[\d,]*) code points\)/g },
      { pattern: /\*\*Post\*\*:[^*]*?`text` \(1 to (\d[\d,]*) characters\)/g },
      { pattern: /a post of (\d[\d,]*) emoji is valid/g },
      { pattern: /(\d[\d,]*) emoji are a valid post/g },
    ],
  },
  MESSAGE_TEXT_MAX: {
    value: MESSAGE_TEXT_MAX,
    statements: [
      { pattern: /sendMessage: `\{to, text\}` \([^)]*text 1–(\d[\d,]*) code points\)/g },
      { pattern: /\*\*Direct message\*\*:[^*]*?`text` \(1 to (\d[\d,]*) characters\)/g },
      { pattern: /message text 1 to (\d[\d,]*)\. Request bodies/g },
    ],
  },
  MENTIONS_MAX: { value: MENTIONS_MAX, statements: [{ pattern: /at most (\d[\d,]*) \(`MENTIONS_MAX`/g }] },
  LIMIT_MIN: {
    value: LIMIT_MIN,
    statements: [
      { pattern: /`limit` (?:is a whole number from )?(\d[\d,]*) to [\d,]+/g },
      { pattern: /a whole number from (\d[\d,]*) to [\d,]+, or left out/g },
    ],
  },
  LIMIT_MAX: {
    value: LIMIT_MAX,
    statements: [
      { pattern: /`limit` (?:is a whole number from )?[\d,]+ to (\d[\d,]*)/g },
      { pattern: /a whole number from [\d,]+ to (\d[\d,]*), or left out/g },
      { pattern: /every `limit` from [\d,]+ to (\d[\d,]*)/g },
    ],
  },
  LIMIT_DEFAULT: {
    value: LIMIT_DEFAULT,
    statements: [{ pattern: /`limit` (?:is a whole number from )?[\d,]+ to [\d,]+, default (\d[\d,]*)/g }, { pattern: /or left out for (\d[\d,]*)/g }],
  },
  BODY_LIMIT_BYTES: {
    value: BODY_LIMIT_BYTES,
    statements: [
      { pattern: /(\d[\d,]*) KiB body limit/g, scale: 1024 },
      { pattern: /[Bb]od(?:y|ies) (?:over|larger than) (\d[\d,]*) KiB/g, scale: 1024 },
      { pattern: /at most (\d[\d,]*) KiB \(else/g, scale: 1024 },
    ],
  },
  SIGNUP_EXPIRES_IN_SECONDS: {
    value: SIGNUP_EXPIRES_IN_SECONDS,
    statements: [
      { pattern: /`expires_in` \(?(\d[\d,]*) seconds/g },
      { pattern: /"expires_in":(\d[\d,]*),"interval"/g },
      { pattern: /nobody approved within (\d[\d,]*) minutes/g, scale: 60 },
    ],
  },
  SIGNUP_POLL_INTERVAL_SECONDS: {
    value: SIGNUP_POLL_INTERVAL_SECONDS,
    statements: [{ pattern: /`interval` \(?(\d[\d,]*) seconds/g }, { pattern: /"interval":(\d[\d,]*)/g }],
  },
  WEBHOOKS_MAX: { value: WEBHOOKS_MAX, statements: [{ pattern: /at most (\d[\d,]*) per agent \(`too-many-webhooks`\)/g }] },
  WEBHOOK_FAILURES_MAX: { value: WEBHOOK_FAILURES_MAX, statements: [{ pattern: /(\d[\d,]*) failures in a row/g }] },
  IDEMPOTENCY_KEY_HOURS: {
    value: IDEMPOTENCY_KEY_HOURS,
    statements: [{ pattern: /result (?:object )?is kept (\d[\d,]*) hours/g }, { pattern: /remembered (\d[\d,]*) hours per/g }],
  },
  FEEDBACK_TEXT_MAX: { value: FEEDBACK_TEXT_MAX, statements: [{ pattern: /`problem` \(1 to (\d[\d,]*) characters\)/g }] },
};

/** Every statement of a limit in the docs: where, what it says, and the number it gives in kit's unit. */
function statementsOf(statements: Statement[]): { file: string; text: string; stated: number }[] {
  return [...TEXTS].flatMap(([file, text]) =>
    statements.flatMap(({ pattern, scale = 1 }) =>
      [...text.matchAll(pattern)].map((match) => ({ file, text: match[0], stated: Number((match[1] ?? '').replaceAll(',', '')) * scale })),
    ),
  );
}

describe("the docs' numbers for the limits", () => {
  it.each(Object.entries(LIMITS))("%s: every statement in README.md and docs/*.md gives kit's number", (_name, { value, statements }) => {
    for (const statement of statements) {
      const found = statementsOf([statement]);
      // A statement reworded so that its pattern finds nothing would pass unseen: each still finds one.
      expect(found.length, `the docs still say ${String(statement.pattern)}`).toBeGreaterThan(0);
      for (const { file, text, stated } of found) expect(stated, `${file}: "${text}"`).toBe(value);
    }
  });
});
