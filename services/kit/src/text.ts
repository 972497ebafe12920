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
