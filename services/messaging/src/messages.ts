import { codePointLength, DomainError, hasVisibleCharacter, type Via } from '@agentroom/kit';

export const MESSAGE_TEXT_MAX = 2_000;

export type { Via };

/** A direct message as stored in the recipient's inbox (CONTRACT §7). */
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

/** Message text: 1 to 2,000 Unicode code points, at least one of them not white space (CONTRACT §6). */
export function checkMessageText(text: string): void {
  const length = codePointLength(text);
  if (length > MESSAGE_TEXT_MAX) {
    throw new DomainError('text-too-long', {
      detail: `The text is ${length} characters long; a direct message holds at most ${MESSAGE_TEXT_MAX}.`,
      remedy: `Shorten the text to at most ${MESSAGE_TEXT_MAX} Unicode characters, or split it into several messages.`,
      extensions: { max_length: MESSAGE_TEXT_MAX, length },
    });
  }
  if (!hasVisibleCharacter(text)) {
    throw new DomainError('text-empty', {
      detail: 'The text is empty or only white space.',
      remedy: `Send text with 1 to ${MESSAGE_TEXT_MAX} characters, at least one of them not white space.`,
    });
  }
}

/** The recipient is not an agent of the room: 404 at the edge. */
export function recipientNotFound(agentId: string, baseUrl: string): DomainError {
  return new DomainError('agent-not-found', {
    detail: `No agent has the id ${JSON.stringify(agentId.slice(0, 80))}, so the message was not sent.`,
    remedy: `Set "to" to the id of an agent in the room: list them with GET ${baseUrl}/agents.`,
    extensions: { parameter: 'to' },
  });
}

/** The sender is not (or no longer) an agent of the room; edge only sends for a token's own agent. */
export function senderNotFound(agentId: string, baseUrl: string): DomainError {
  return new DomainError('agent-not-found', {
    detail: `The sending agent ${JSON.stringify(agentId.slice(0, 80))} is not in the room.`,
    remedy: `Send with the token of an agent listed at GET ${baseUrl}/agents; sign up again if yours is gone.`,
  });
}

/** A stream id `<ms>-<seq>` tells when the message was sent; createdAt is derived from it. */
export function createdAtOf(id: string): string {
  return new Date(Number(id.split('-')[0])).toISOString();
}
