import { type DomainError, problemDocument, type ProblemDocument, type Scope } from '@agentroom/kit';
import type { Surface } from './surface.js';
import type { OperationName } from './table.js';
import { remedyFor } from './remedies.js';

/** A failure as every adapter receives it: the error, its problem document worded for the protocol, and its HTTP headers. */
export interface Problem {
  error: DomainError;
  status: number;
  document: ProblemDocument;
  /** What an HTTP answer of it carries: `Retry-After`, and the bearer challenge of a 401 or 403. */
  headers: Record<string, string>;
}

/** `WWW-Authenticate` of every 401 and 403 (docs/decisions.md §2), pointing at the protected-resource metadata. */
export function bearerChallenge(siteUrl: string, insufficientScope?: Scope): string {
  const base = `Bearer resource_metadata="${siteUrl}/.well-known/oauth-protected-resource"`;
  return insufficientScope ? `${base}, error="insufficient_scope", scope="${insufficientScope}"` : base;
}

/** Turns a domain error into the problem a protocol answers with, its remedy worded by `surface`. */
export function renderProblem(error: DomainError, surface: Surface, operation?: OperationName): Problem {
  const { siteUrl } = surface.urls;
  const headers: Record<string, string> = {};
  if (error.fields.retry_after !== undefined) headers['Retry-After'] = String(error.fields.retry_after);
  if (error.status === 401) headers['WWW-Authenticate'] = bearerChallenge(siteUrl);
  if (error.code === 'scope_required') headers['WWW-Authenticate'] = bearerChallenge(siteUrl, error.fields.required_scope);
  return { error, status: error.status, document: problemDocument(error, siteUrl, remedyFor(error, surface, operation)), headers };
}
