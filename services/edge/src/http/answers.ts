import type { IncomingMessage, ServerResponse } from 'node:http';
import { PROBLEM_CONTENT_TYPE } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import type { QuotaState } from '@agentroom/kit/store';
import type { Express, Request, RequestHandler, Response } from 'express';
import type { Admission, Core } from '../operations/core.js';
import type { Problem } from '../operations/problem.js';
import type { Surface } from '../operations/surface.js';

/**
 * What every HTTP adapter (REST, OAuth, MCP, A2A, the live feeds) shares: the request's admission,
 * and the answers they write the same way. Adapters import this, never each other.
 */

/**
 * What a path answered before express's router (the GET and MCP fast paths, rest/fast-reads.ts and
 * mcp/fast.ts) is given by the server: the pipeline, how its protocol words problems, its path, and
 * express's objects for the answers only express writes.
 */
export interface FastPathOptions {
  core: Core;
  /** The protocol's surface, for the remedies of any problem. */
  surface: Surface;
  /** The literal path it answers. */
  path: string;
  log: Logger;
  /** The client address of a request when it is known without express (the same peer and X-Forwarded-For seen before). */
  knownAddress(req: IncomingMessage): string | undefined;
  /** The request and response as express's (its prototypes and `locals`), for an answer only express writes. */
  asExpress(req: IncomingMessage, res: ServerResponse): { req: Request; res: Response };
}

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
 * The answer of a URL to every method but its own (mount it with `router.all(path, …)` after the
 * URL's routes): `OPTIONS` is 204 with `Allow` (a CORS preflight never gets here: the HTTP contract
 * answers it first), and anything else, `TRACE` and `GET` on a POST-only endpoint included, is 405
 * with `Allow` and a problem document in the words of `surface` (RFC 9110 §9.3.7, §15.5.6).
 */
export function otherMethods(core: Pick<Core, 'problem'>, surface: Surface, methods: readonly string[], detail?: (method: string) => string): RequestHandler {
  const allow = methods.join(', ');
  return (req, res) => {
    if (req.method === 'OPTIONS') {
      res.setHeader('Allow', allow);
      res.status(204).end();
      return;
    }
    const error = new DomainError('method-not-allowed', { detail: detail?.(req.method) ?? `${req.method} is not served here; this URL takes ${allow}.`, fields: { expected: allow } });
    const problem = core.problem(error, surface);
    sendProblem(res, { ...problem, headers: { ...problem.headers, Allow: allow } });
  };
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

/** The `Content-Type` of every JSON answer, as `res.json` sets it. */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * `output` as the bytes of a JSON answer: those kept for that very object when it was written
 * before (edge's first page hands out the same object until the page changes, so it is serialised
 * once per change rather than per request). Outputs are never mutated once answered, so the bytes stay true.
 */
export function jsonBytes(output: unknown): Buffer {
  let body = typeof output === 'object' && output !== null ? serialised.get(output) : undefined;
  if (body === undefined) {
    body = Buffer.from(JSON.stringify(output), 'utf8');
    if (typeof output === 'object' && output !== null) serialised.set(output, body);
  }
  return body;
}

/** Writes `output` as JSON with `status`, as `res.json` would (same bytes, same `Content-Type`), from `jsonBytes`. */
export function sendJson(res: Response, status: number, output: unknown): void {
  const body = jsonBytes(output);
  if (!res.get('Content-Type')) res.setHeader('Content-Type', JSON_CONTENT_TYPE);
  res.status(status).send(body);
}

/**
 * A request and response that reached edge outside its express app, made express's as `app.handle`
 * does first (its prototypes, so `req.ip`, `req.query` and `res.send` follow the app's settings, and
 * `locals`): for a fast path handing a request to express-based code it does not answer itself.
 */
export function expressObjects(app: Express, incoming: IncomingMessage, outgoing: ServerResponse): { req: Request; res: Response } {
  // The properties go on before the prototypes change: V8 adds them faster to the objects as they are.
  const incomingWithRes = incoming as IncomingMessage & { res?: ServerResponse };
  const outgoingWithReq = outgoing as ServerResponse & { req: IncomingMessage; locals?: Response['locals'] };
  incomingWithRes.res = outgoing;
  outgoingWithReq.req = incoming;
  outgoingWithReq.locals ??= Object.create(null) as Response['locals'];
  return { req: Object.setPrototypeOf(incoming, app.request) as Request, res: Object.setPrototypeOf(outgoing, app.response) as Response };
}

/**
 * The headers a fast path's 200 starts with, in the order the app's steps set them: the request id,
 * CORS (`corsFlat`, name and value in turn) and the RateLimit fields of the caller's quota. The
 * caller adds its content type and length.
 */
export function leadingHeaders(requestId: string, corsFlat: readonly string[], quota: QuotaState): string[] {
  return ['X-Request-Id', requestId, ...corsFlat, 'RateLimit-Limit', String(quota.limit), 'RateLimit-Remaining', String(quota.remaining), 'RateLimit-Reset', String(quota.resetSeconds)];
}
