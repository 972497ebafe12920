import type { IncomingMessage, ServerResponse } from 'node:http';
import { admitRequest, corsHeaders, followRequest, type HttpContractOptions, jsonBody, runWithContext, setRateLimitHeaders } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import { REST_BINDINGS } from '@agentroom/api';
import type { Express, Request, Response } from 'express';
import { asksNoCache, expressObjects as asExpress } from '../http/answers.js';
import type { Core, Credentials } from '../operations/core.js';
import type { Surface } from '../operations/surface.js';
import { answerOutcome, idempotencyKeyOf, inputOf, restHandler } from './routes.js';
import { fastReads } from './fast-reads.js';

export interface LeanReadsOptions {
  /** Edge's express app: its request and response prototypes (and settings: `trust proxy`, the query parser) serve here too. */
  app: Express;
  core: Core;
  /** REST's surface, for the remedies of any problem. */
  surface: Surface;
  /** The path of `{base_url}`. */
  basePath: string;
  log: Logger;
  /** Counts the request and puts its admission where the handler finds it, as the app's own admission step does. */
  admit: HttpContractOptions['admit'];
  /** The client address of a request when known without express: reads that have it take the fast path (rest/fast-reads.ts). */
  knownAddress?: (req: IncomingMessage) => string | undefined;
  /** The app's error handler, for what fails unexpectedly. */
  answerError(error: unknown, req: Request, res: Response): void;
}

/**
 * The lean path of the most frequent request, `GET {base_url}/posts` (the first page, from edge's
 * memory, and the pages after it): answered by the same REST handler as the express route, with the
 * same contract steps in the same order (request id and log line, CORS, admission and RateLimit
 * headers), but without express's router and the middleware such a request never needs (body
 * parsers, the preflight, the other routes), which cost more than the request's own work.
 *
 * It takes only requests it answers exactly as the app would: `GET` of the literal path, with no
 * body and no conditional headers (express could answer those 304 or read the body); anything else
 * (`HEAD`, `/posts/`, `If-None-Match`, a body) goes to the app. Answers whether it took the request.
 */
export function leanReads(options: LeanReadsOptions): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { app, core, surface, log } = options;
  const base = options.basePath.replace(/\/$/, '');
  const path = `${base}/posts`;
  const binding = REST_BINDINGS.find((b) => b.operation === 'listPosts' && b.method === 'GET');
  if (!binding || `${binding.path}` !== '/posts') throw new Error('the REST table no longer binds GET /posts to listPosts');
  const handler = restHandler(core, surface, binding);
  // {base_url} is public API: every answer under it carries the CORS headers (server.ts, publicApi).
  const cors = Object.entries(corsHeaders());
  const route = (): string => path;
  const { knownAddress } = options;
  const fast = knownAddress && fastReads({ core, surface, path, log, knownAddress, asExpress: (req, res) => asExpress(app, req, res), answerError: options.answerError });

  const serve = async (req: Request, res: Response): Promise<void> => {
    for (const [name, value] of cors) res.setHeader(name, value);
    const refusal = await admitRequest(options.admit, req, res);
    if (refusal) throw refusal;
    await handler(req, res);
  };

  return (incoming, outgoing) => {
    const { url = '/', headers } = incoming;
    if (incoming.method !== 'GET') return false;
    const query = url.indexOf('?');
    if ((query === -1 ? url : url.slice(0, query)) !== path || url.includes('#')) return false;
    if (headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined) return false;
    if (headers['if-none-match'] !== undefined || headers['if-modified-since'] !== undefined) return false;
    if (fast?.(incoming, outgoing, query === -1 ? '' : url.slice(query + 1))) return true;
    const { req, res } = asExpress(app, incoming, outgoing);
    const requestId = followRequest(req, res, 'edge', log, route);
    runWithContext({ requestId }, () => serve(req, res)).catch((error: unknown) => options.answerError(error, req, res));
    return true;
  };
}

export interface LeanWritesOptions extends LeanReadsOptions {
  /** Who a request comes from, as the app's admission step reads it. */
  credentials(req: Request): Credentials;
}

/** A JSON body, as `Content-Type` names it (parameters such as `charset` are the parser's to judge). */
const JSON_TYPE = /^application\/json[\t ]*(;|$)/i;

/**
 * The lean path of the most frequent write, `POST {base_url}/posts` with a JSON body: the same
 * contract steps as the app's (request id and log line, CORS, the body parser and its 413, 400 and
 * 415, one count against the quota with its RateLimit headers) and the same answers, without
 * express's router and the middleware such a request never needs. Its quota count and idempotency
 * claim go to the store together (`Core.admitAndInvoke`): one Redis round trip instead of two.
 *
 * It takes only `POST` of the literal path, without a query, whose `Content-Type` is
 * `application/json`; anything else (another JSON type, a form, no type, `/posts/`) goes to the
 * app, which answers it as before. Answers whether it took the request.
 */
export function leanWrites(options: LeanWritesOptions): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { app, core, surface, log } = options;
  const path = `${options.basePath.replace(/\/$/, '')}/posts`;
  const binding = REST_BINDINGS.find((b) => b.operation === 'createPost' && b.method === 'POST');
  if (!binding || `${binding.path}` !== '/posts' || binding.base !== 'base' || binding.from !== 'body') throw new Error('the REST table no longer binds POST /posts to createPost with a body');
  const parse = jsonBody();
  const cors = Object.entries(corsHeaders());
  const route = (): string => path;
  /** Reads the body as the app's parser does: answers the parser's error, or undefined once `req.body` holds it. */
  const readBody = (req: Request, res: Response): Promise<unknown> => new Promise((resolve) => void parse(req, res, (error?: unknown) => resolve(error)));

  const serve = async (req: Request, res: Response): Promise<void> => {
    for (const [name, value] of cors) res.setHeader(name, value);
    const unreadable = await readBody(req, res);
    if (unreadable !== undefined) {
      // Counted like any request, then answered as the app answers a body it cannot read.
      const refusal = await admitRequest(options.admit, req, res);
      throw refusal ?? unreadable;
    }
    const { admission, outcome } = await core.admitAndInvoke(options.credentials(req), binding.operation, inputOf(binding, core, req), {
      surface,
      idempotencyKey: idempotencyKeyOf(req),
      readThrough: asksNoCache(req.headers['cache-control']),
    });
    // Where the app's admission step puts them, for whatever reads them later (the error handler).
    res.locals.admission = admission;
    res.locals.quotaSubject = admission.subject;
    setRateLimitHeaders(res, admission.quota);
    answerOutcome(res, binding, outcome);
  };

  return (incoming, outgoing) => {
    if (incoming.method !== 'POST' || incoming.url !== path) return false;
    const type = incoming.headers['content-type'];
    if (type === undefined || !JSON_TYPE.test(type)) return false;
    const { req, res } = asExpress(app, incoming, outgoing);
    const requestId = followRequest(req, res, 'edge', log, route);
    runWithContext({ requestId }, () => serve(req, res)).catch((error: unknown) => options.answerError(error, req, res));
    return true;
  };
}
