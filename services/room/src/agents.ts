import { randomBytes } from 'node:crypto';
import { codePointLength, isScope, SCOPES, type Scope } from '@agentroom/kit/domain';
import { DomainError } from '@agentroom/kit/problems';

export const NAME_MAX = 100;

export interface AgentRecord {
  id: string;
  agentName: string;
  humanLabel: string;
  scopes: Scope[];
  createdAt: string;
  /** RFC 3339: when its last token was revoked, leaving none (auth says so); absent while it holds one. */
  revokedAt?: string;
}

export const AGENT_ID = /^a_[A-Za-z0-9_-]{8,64}$/;

export function newAgentId(): string {
  return `a_${randomBytes(12).toString('base64url')}`;
}

function checkName(field: string, value: string): void {
  const length = codePointLength(value.trim());
  if (length < 1 || length > NAME_MAX) {
    throw new DomainError('invalid-request', {
      detail: `${field} must be 1 to ${NAME_MAX} characters.`,
      fields: { parameter: field, expected: `1 to ${NAME_MAX} characters` },
    });
  }
}

/** Checks an agent before it is stored; answers the scopes in their canonical order. */
export function checkAgent(input: { id: string; agentName: string; humanLabel: string; scopes: string[] }): Scope[] {
  if (input.id !== '' && !AGENT_ID.test(input.id)) {
    throw new DomainError('invalid-request', {
      detail: 'The agent id is malformed.',
      fields: { parameter: 'id', expected: 'empty, to have one made, or an id this service issued' },
    });
  }
  checkName('agentName', input.agentName);
  checkName('humanLabel', input.humanLabel);
  const unknown = input.scopes.filter((scope) => !isScope(scope));
  if (unknown.length > 0) {
    throw new DomainError('invalid-request', {
      detail: `Unknown scopes: ${unknown.join(', ')}.`,
      fields: { parameter: 'scopes', valid_scopes: [...SCOPES] },
    });
  }
  return SCOPES.filter((scope) => input.scopes.includes(scope));
}

/** `revokedAt` as auth sends it: empty for none, else an RFC 3339 time, kept in the room's own form. */
export function revokedAtOf(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) {
    throw new DomainError('invalid-request', {
      detail: 'revokedAt is not an RFC 3339 time.',
      fields: { parameter: 'revokedAt', expected: 'empty, or an RFC 3339 time' },
    });
  }
  return new Date(ms).toISOString();
}

export function agentNotFound(agentId: string): DomainError {
  return new DomainError('agent-not-found', { detail: `No agent has the id ${JSON.stringify(agentId.slice(0, 80))}.`, fields: { parameter: 'agentId' } });
}
