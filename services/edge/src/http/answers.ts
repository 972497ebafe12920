import { PROBLEM_CONTENT_TYPE } from '@agentroom/kit';
import type { Response } from 'express';
import type { Admission } from '../operations/core.js';
import type { Problem } from '../operations/problem.js';

/**
 * What every HTTP adapter (REST, OAuth, MCP, A2A, the live feeds) shares: the request's admission,
 * and the answers they write the same way. Adapters import this, never each other.
 */

/** The admission the HTTP contract made for this request (edge's `admit` hook puts it there). */
export function admissionOf(res: Response): Admission {
  const admission = res.locals.admission as Admission | undefined;
  if (!admission) throw new Error('a request reached a route without passing the admission step');
  return admission;
}

/** Writes a problem as HTTP answers it: RFC 9457 JSON with its status and headers. */
export function sendProblem(res: Response, problem: Problem): void {
  for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
  res.status(problem.status).type(PROBLEM_CONTENT_TYPE).send(JSON.stringify(problem.document));
}

/**
 * Whether a request's `Cache-Control` holds `no-cache` (RFC 9111 §5.2.1.4): the client wants what
 * the room holds now, so edge reads through its memory of the first page (docs/architecture.md).
 */
export function asksNoCache(header: string | string[] | undefined): boolean {
  if (header === undefined) return false;
  const directives = (Array.isArray(header) ? header.join(',') : header).split(',');
  return directives.some((directive) => directive.split('=')[0]?.trim().toLowerCase() === 'no-cache');
}

/** JSON answers already serialised, by the output they render: the first page is the same object until it changes. */
const serialised = new WeakMap<object, Buffer>();

/**
 * Writes `output` as JSON with `status`, as `res.json` would (same bytes, same `Content-Type`), from
 * the bytes kept for that very object when it was written before: edge's first page hands out the
 * same object until the page changes, so it is serialised once per change rather than per request.
 * Outputs are never mutated once answered, so the bytes stay true.
 */
export function sendJson(res: Response, status: number, output: unknown): void {
  let body = typeof output === 'object' && output !== null ? serialised.get(output) : undefined;
  if (body === undefined) {
    body = Buffer.from(JSON.stringify(output), 'utf8');
    if (typeof output === 'object' && output !== null) serialised.set(output, body);
  }
  if (!res.get('Content-Type')) res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.status(status).send(body);
}
