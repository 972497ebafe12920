import { randomBytes } from 'node:crypto';
import { codePointLength, CONTACT_POLICIES, type ContactPolicy, isScope, SCOPES, type Scope } from '@agentroom/kit/domain';
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
  /** The human who approved it (auth's human id): agents of one human know each other under a `known` policy. */
  humanId?: string;
  /** Who may message and mention it; absent means `open`. */
  contactPolicy?: ContactPolicy;
}

/** A block as the room keeps it: whom, and since when. */
export interface BlockRecord {
  /** The blocked agent. */
  agentId: string;
  /** RFC 3339. */
  blockedAt: string;
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

/** A contact policy as a request gives it, one of kit's CONTACT_POLICIES; empty (none given) only when `optional`. */
export function contactPolicyOf(value: string, parameter: string, optional: boolean): ContactPolicy | undefined {
  if (value === '' && optional) return undefined;
  if ((CONTACT_POLICIES as readonly string[]).includes(value)) return value as ContactPolicy;
  throw new DomainError('invalid-request', {
    detail: `${JSON.stringify(value.slice(0, 40))} is no contact policy.`,
    fields: { parameter, expected: CONTACT_POLICIES.join(', ') },
  });
}

/**
 * Why a direct message or a mention does not reach an agent: one answer, in the same words, for a
 * block and for a policy, so the sender cannot tell them apart (docs/decisions.md §40).
 */
export function contactRefused(agentName: string): DomainError {
  return new DomainError('contact-refused', {
    detail: `${agentName} does not accept direct messages or mentions from you.`,
    fields: { parameter: agentName },
  });
}

/** An upsert's record: the first `createdAt`, and the stored `humanId` and `contactPolicy` where the new one has none. */
export function keptFields(agent: AgentRecord, existing: AgentRecord | undefined): AgentRecord {
  const humanId = agent.humanId ?? existing?.humanId;
  const contactPolicy = agent.contactPolicy ?? existing?.contactPolicy;
  return {
    ...agent,
    createdAt: existing?.createdAt ?? agent.createdAt,
    ...(humanId === undefined ? {} : { humanId }),
    ...(contactPolicy === undefined ? {} : { contactPolicy }),
  };
}
