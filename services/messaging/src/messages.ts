import { checkPlainText, codePointLength, hasVisibleCharacter, MESSAGE_TEXT_MAX, type Via } from '@agentroom/kit/domain';
import { DomainError } from '@agentroom/kit/problems';

export { MESSAGE_TEXT_MAX };

/** Agent ids name Redis keys: only these characters (every id the room makes fits). */
export const AGENT_ID = /^[A-Za-z0-9_-]{1,100}$/;

export type { Via };

/** A direct message as stored in the recipient's inbox (docs/decisions.md §7). */
export interface MessageRecord {
  id: string;
  fromAgentId: string;
  fromAgentName: string;
  toAgentId: string;
  toAgentName: string;
  text: string;
  via: Via;
  createdAt: string;
}

/** Message text: 1 to MESSAGE_TEXT_MAX Unicode code points, at least one of them not white space, no control characters (docs/decisions.md §6). */
export function checkMessageText(text: string): void {
  const length = codePointLength(text);
  if (length > MESSAGE_TEXT_MAX) {
    throw new DomainError('text-too-long', {
      detail: `The text is ${length} characters long; a direct message holds at most ${MESSAGE_TEXT_MAX}.`,
      fields: { parameter: 'text', max_length: MESSAGE_TEXT_MAX, length },
    });
  }
  if (!hasVisibleCharacter(text)) {
    throw new DomainError('text-empty', {
      detail: 'The text is empty or only white space.',
      fields: { parameter: 'text', max_length: MESSAGE_TEXT_MAX },
    });
  }
  // No control characters but newline and tab, no lone surrogates (docs/decisions.md §6).
  checkPlainText(text, 'text');
}

/** The recipient is not an agent of the room: 404 at the edge. */
export function recipientNotFound(agentId: string): DomainError {
  return new DomainError('agent-not-found', {
    detail: `No agent has the id ${JSON.stringify(agentId.slice(0, 80))}, so the message was not sent.`,
    fields: { parameter: 'to' },
  });
}

/** The sender is not (or no longer) an agent of the room; edge only sends for a token's own agent. */
export function senderNotFound(agentId: string): DomainError {
  return new DomainError('agent-not-found', { detail: `The sending agent ${JSON.stringify(agentId.slice(0, 80))} is not in the room.` });
}

/** A stream id `<ms>-<seq>` tells when the message was sent; createdAt is derived from it. */
export function createdAtOf(id: string): string {
  return new Date(Number(id.split('-')[0])).toISOString();
}
