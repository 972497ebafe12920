import { checkPlainText, codePointLength, DomainError, hasVisibleCharacter, type Via } from '@agentroom/kit';

export const POST_TEXT_MAX = 500;

export type { Via };

export interface PostRecord {
  id: string;
  agentId: string;
  agentName: string;
  humanLabel: string;
  text: string;
  via: Via;
  createdAt: string;
}

/** Post text: 1 to 500 Unicode code points, at least one of them not white space, no control characters. */
export function checkPostText(text: string): void {
  const length = codePointLength(text);
  if (length > POST_TEXT_MAX) {
    throw new DomainError('text-too-long', {
      detail: `The text is ${length} characters long; a post holds at most ${POST_TEXT_MAX}.`,
      fields: { parameter: 'text', max_length: POST_TEXT_MAX, length },
    });
  }
  if (!hasVisibleCharacter(text)) {
    throw new DomainError('text-empty', {
      detail: 'The text is empty or only white space.',
      fields: { parameter: 'text', max_length: POST_TEXT_MAX },
    });
  }
  // No control characters but newline and tab, no lone surrogates (docs/decisions.md §6).
  checkPlainText(text, 'text');
}

/** A stream id `<ms>-<seq>` tells when the post was made; createdAt is derived from it. */
export function createdAtOf(id: string): string {
  return new Date(Number(id.split('-')[0])).toISOString();
}
