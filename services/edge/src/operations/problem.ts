import { type Scope, SCOPES } from '@agentroom/kit/domain';
import { type DomainError, problemDocument, type ProblemDocument } from '@agentroom/kit/problems';
import type { Surface } from './surface.js';
import type { OperationName } from './table.js';
import { remedyFor } from './remedies.js';
import { apiResourceMetadataUrl } from '@agentroom/api';

/** A failure as every adapter receives it: the error, its problem document worded for the protocol, and its HTTP headers. */
export interface Problem {
  error: DomainError;
  status: number;
  document: ProblemDocument;
  /** What an HTTP answer of it carries: `Retry-After`, and the bearer challenge of a 401 or 403. */
  headers: Record<string, string>;
}

/**
 * `WWW-Authenticate` of every 401 and 403 (docs/decisions.md §2), pointing at the protected-resource
 * metadata: the 403 of a missing scope is the step-up challenge (RFC 6750 §3.1, MCP authorization),
 * naming the scopes to ask for.
 */
export function bearerChallenge(metadataUrl: string, challenge: { scope?: string; insufficientScope?: boolean } = {}): string {
  const parts = [`resource_metadata="${metadataUrl}"`];
  if (challenge.insufficientScope) parts.push('error="insufficient_scope"');
  if (challenge.scope !== undefined) parts.push(`scope="${challenge.scope}"`);
  return `Bearer ${parts.join(', ')}`;
}

/** The scopes a step-up asks for: those held and the one missing, so the new token loses nothing. */
export function stepUpScopes(required: Scope, held: readonly Scope[] = []): string {
  return SCOPES.filter((scope) => scope === required || held.includes(scope)).join(' ');
}

/**
 * Turns a domain error into the problem a protocol answers with, its remedy worded by `surface`;
 * `endpoint` (`POST https://…/mcp`) names where a request went when no operation is known.
 */
export function renderProblem(error: DomainError, surface: Surface, operation?: OperationName, endpoint?: string): Problem {
  const { siteUrl } = surface.urls;
  const headers: Record<string, string> = {};
  if (error.fields.retry_after !== undefined) headers['Retry-After'] = String(error.fields.retry_after);
  const metadata = surface.resourceMetadata ?? apiResourceMetadataUrl(surface.urls);
  const required = error.fields.required_scope;
  // MCP hosts ask for the scope a 401 names; REST's challenge stays as it was.
  if (error.status === 401)
    headers['WWW-Authenticate'] = bearerChallenge(metadata, required === undefined || surface.protocol !== 'mcp' ? {} : { scope: required });
  if (error.code === 'scope_required') {
    headers['WWW-Authenticate'] = bearerChallenge(metadata, {
      insufficientScope: true,
      ...(required === undefined ? {} : { scope: surface.protocol === 'mcp' ? stepUpScopes(required, error.fields.held_scopes) : required }),
    });
  }
  return { error, status: error.status, document: problemDocument(error, siteUrl, remedyFor(error, surface, operation, endpoint)), headers };
}
