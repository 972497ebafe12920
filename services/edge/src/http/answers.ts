import type { IncomingMessage, ServerResponse } from 'node:http';
import { PROBLEM_CONTENT_TYPE } from '@agentroom/kit/http';
import { DomainError } from '@agentroom/kit/problems';
import type { Express, Request, Response } from 'express';
import type { Admission, Core } from '../operations/core.js';
import type { Problem } from '../operations/problem.js';
import type { Surface } from '../operations/surface.js';

/**
 * What every HTTP adapter (REST, OAuth, MCP, A2A, the live feeds) shares: the request's admission,
 * and the answers they write the same way, over the pipeline (pipeline.ts) or express alike.
 * Adapters import this, never each other.
 */

/** The admission the HTTP contract made for this request (edge's `admit` hook puts it there). */
export function admissionOf(res: Response): Admission {
  const admission = res.locals.admission as Admission | undefined;
  if (!admission) throw new Error('a request reached a route without passing the admission step');
  return admission;
}

/** The `Content-Type` of a problem document, as express's `res.type(...).send(text)` writes it. */
const PROBLEM_JSON = `${PROBLEM_CONTENT_TYPE}; charset=utf-8`;

/**
 * Writes a problem as HTTP answers it: RFC 9457 JSON with its status and headers (after any the
 * response already holds). One writer for the pipeline's routes and express's alike.
 */
export function sendProblem(res: ServerResponse, problem: Problem): void {
  for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
  const body = Buffer.from(JSON.stringify(problem.document), 'utf8');
  res.setHeader('Content-Type', PROBLEM_JSON);
  res.setHeader('Content-Length', String(body.length));
  res.statusCode = problem.status;
  res.end(body);
}

/**
 * The answer of a URL to every method but its own (mount it with `router.all(path, …)` after the
 * URL's routes, or call it from a pipeline route): `OPTIONS` is 204 with `Allow` (a CORS preflight
 * never gets here: the pipeline answers it first), and anything else, `TRACE` and `GET` on a
 * POST-only endpoint included, is 405 with `Allow` and a problem document in the words of `surface`
 * (RFC 9110 §9.3.7, §15.5.6).
 */
export function otherMethods(
  core: Pick<Core, 'problem'>,
  surface: Surface,
  methods: readonly string[],
  detail?: (method: string) => string,
): (req: IncomingMessage, res: ServerResponse) => void {
  const allow = methods.join(', ');
  return (req, res) => {
    if (req.method === 'OPTIONS') {
      res.setHeader('Allow', allow);
      res.statusCode = 204;
      res.end();
      return;
    }
    const method = req.method ?? 'GET';
    const error = new DomainError('method-not-allowed', {
      detail: detail?.(method) ?? `${method} is not served here; this URL takes ${allow}.`,
      fields: { expected: allow },
    });
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

/**
 * A request and response that reached edge's pipeline, made express's as `app.handle` does first
 * (its prototypes, so `req.ip`, `req.query` and `res.send` follow the app's settings, and `locals`):
 * for a route handing a request to express-based code (the MCP SDK, the app's error handler).
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
