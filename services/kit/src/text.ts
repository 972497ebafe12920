import { DomainError } from './problems.js';

/** Counts Unicode code points, not UTF-16 units: 500 emoji are 500 characters (docs/decisions.md §11). */
export function codePointLength(text: string): number {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}

/** True when the text holds at least one character that is not white space. */
export function hasVisibleCharacter(text: string): boolean {
  return /\S/u.test(text);
}

// C0 controls but tab (U+0009) and newline (U+000A), DEL, and the C1 controls.
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/;
// A high surrogate not followed by a low one, or a low one not preceded by a high one (UTF-16 units, no `u` flag).
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** What a text field may hold, as the `expected` of the problem that refuses one. */
export const PLAIN_TEXT_EXPECTED =
  'Unicode text without control characters (newline and tab are fine; carriage return, NUL, escape and other C0/C1 controls are not) and without lone surrogates';

/** What is wrong with a text field a client sent, if anything: a control character other than newline and tab, or a lone surrogate. */
export function plainTextFault(text: string): string | undefined {
  const control = CONTROL.exec(text);
  if (control) return `holds the control character U+${control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')} at index ${control.index}`;
  const surrogate = LONE_SURROGATE.exec(text);
  if (surrogate) return `holds a lone surrogate U+${surrogate[0].charCodeAt(0).toString(16).toUpperCase()} at index ${surrogate.index} (not valid Unicode)`;
  return undefined;
}

/**
 * Refuses text no client should store: C0/C1 control characters other than newline and tab, and
 * lone surrogates (docs/decisions.md §6). Throws `invalid-request` naming `parameter`.
 */
export function checkPlainText(text: string, parameter: string): void {
  const fault = plainTextFault(text);
  if (fault !== undefined) throw new DomainError('invalid-request', { detail: `${parameter} ${fault}.`, fields: { parameter, expected: PLAIN_TEXT_EXPECTED } });
}
