import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type ErrorRequestHandler, type Express, type Request, type RequestHandler, type Response } from 'express';
import { REQUEST_ID_HEADER, requestIdFrom, runWithContext } from '../context.js';
import type { Logger } from '../log.js';
import { httpRequestDuration, quotaRejections } from '../metrics.js';
import { DomainError, unavailable } from '../problems.js';
import type { QuotaState, QuotaStore } from '../store/quota.js';
import { nextUtcMidnight } from '../store/clock.js';
import { isStorageUnavailable } from '../store/redis.js';
import { fromServiceError } from '../grpc/status.js';
import { prefersHtml, type ProblemAnswer, sendNotFoundPage, sendProblem } from './problem.js';
import { idempotency } from './idempotency.js';
import type { IdempotencyStore } from '../store/idempotency.js';
// The largest request body accepted, any content type (docs/decisions.md §6).
import { BODY_LIMIT_BYTES } from '../limits.js';

/** One call counted: against which subject (`tok:<id>` or `addr:<ip>`), the quota after it, and whether to refuse it now. */
export interface Admission {
  subject: string;
  quota: QuotaState;
  /** Answered at once, RateLimit headers included (the quota is spent, storage is down...). */
  refusal?: DomainError;
}

export interface HttpContractOptions {
  service: string;
  siteUrl: string;
  log: Logger;
  /** Express `trust proxy`: which hops may set X-Forwarded-For (our router and Envoy). */
  trustProxy: string;
  /**
   * Counts every request against a daily quota before anything else runs (see `addressAdmission`).
   * Left out, the request id, CORS, admission and preflight steps ran before the app (edge's request
   * pipeline, which calls this module's step functions): the app adds the body step, its routes and
   * the error handler only.
   */
  admit?(req: Request, res: Response): Promise<Admission>;
  /** Words the remedy of a problem (and any headers it needs) for whoever this surface serves. */
  answer(error: DomainError, req: Request): ProblemAnswer;
  /** When set, every POST honours `Idempotency-Key` by replaying its first HTTP answer. */
  idempotency?: IdempotencyStore;
  /**
   * Which requests a browser on any origin may make (the public API): they get `Access-Control-Allow-Origin: *`
   * (never credentials) on every answer, errors included, and their preflight is answered. Left out, nothing is.
   */
  cors?: (req: Request) => boolean;
}

/** Request headers a browser on another origin may send to the public API. */
export const CORS_ALLOW_HEADERS = [
  'Authorization',
  'Content-Type',
  'Idempotency-Key',
  'Mcp-Protocol-Version',
  'Mcp-Session-Id',
  'Mcp-Method',
  'Mcp-Name',
  'Last-Event-ID',
  'A2A-Version',
];
/** Answer headers a browser on another origin may read. */
export const CORS_EXPOSE_HEADERS = [
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
  'X-Request-Id',
  'Idempotent-Replayed',
  'Retry-After',
  'WWW-Authenticate',
  'Mcp-Session-Id',
  'Allow',
];
/** Methods of the public API, for a preflight. */
export const CORS_ALLOW_METHODS = ['GET', 'HEAD', 'POST', 'DELETE'];

/** The headers of an answer any origin may read: no credentials, ever (docs/decisions.md §1). */
export function corsHeaders(): Record<string, string> {
  return { 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': CORS_EXPOSE_HEADERS.join(', ') };
}

/** The extra headers of a preflight's answer (204), cached by the browser for two hours. */
export function corsPreflightHeaders(): Record<string, string> {
  return {
    'Access-Control-Allow-Methods': CORS_ALLOW_METHODS.join(', '),
    'Access-Control-Allow-Headers': CORS_ALLOW_HEADERS.join(', '),
    'Access-Control-Max-Age': '7200',
  };
}

/** A full allowance of `limit`, for answers that count no call (the gateway's own documents); resets at the next UTC midnight. */
export function uncountedQuota(limit: number, now = Date.now()): QuotaState {
  return { limit, remaining: limit, resetSeconds: Math.max(1, Math.ceil((nextUtcMidnight(now) - now) / 1000)), allowed: true };
}

/** Raised while reading a JSON body whose bytes are not UTF-8. */
const NOT_UTF8 = 'encoding.not.utf8';

/** The JSON body parser of the body step (`readBody`): at most 64 KiB, UTF-8 only. */
function jsonBody(): RequestHandler {
  return express.json({
    limit: BODY_LIMIT_BYTES,
    type: ['application/json', 'application/*+json'],
    // Refused rather than decoded with U+FFFD in place of the bad bytes (docs/decisions.md §6).
    verify(_req, _res, buffer, encoding) {
      if (encoding.toLowerCase().replace('-', '') === 'utf8' && !isUtf8(buffer))
        throw Object.assign(new Error('The body is not valid UTF-8.'), { type: NOT_UTF8 });
    },
  });
}

/** What `jsonBody()` takes for JSON: an object or an array, after any whitespace (its strict mode). */
const JSON_START = /^[ \t\n\r]*([^ \t\n\r])/;

/**
 * What `jsonBody()` makes of a whole body sent as `application/json` in UTF-8 (no other charset, no
 * Content-Encoding), for the body step's plain lane: the same value (a byte order mark dropped, an
 * empty body `{}`), or an error the error handler answers the same way (not UTF-8, not JSON, JSON
 * that is neither an object nor an array).
 */
function parseJsonBytes(bytes: Buffer): unknown {
  if (!isUtf8(bytes)) throw Object.assign(new Error('The body is not valid UTF-8.'), { type: NOT_UTF8 });
  let text = bytes.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.length === 0) return {};
  const first = JSON_START.exec(text)?.[1];
  if (first !== '{' && first !== '[')
    throw Object.assign(new SyntaxError('The body is not a JSON object or array.'), { type: 'entity.parse.failed', status: 400 });
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw Object.assign(error instanceof Error ? error : new SyntaxError(String(error)), { type: 'entity.parse.failed', status: 400 });
  }
}

/**
 * A body of no bytes that no parser made a value of (`Content-Length: 0` without a JSON or form
 * type, as fetch and proxies send a POST without a body) is no body, as when nothing was sent at all
 * (curl's `-X POST`): not zero raw bytes that a route would take for a body that is not an object.
 */
const emptyBodyIsNone: RequestHandler = (req, _res, next) => {
  if (Buffer.isBuffer(req.body) && req.body.length === 0) req.body = undefined;
  next();
};

/** A `Content-Type` both `jsonBody()` and `parseJsonBytes` read as JSON in UTF-8. */
const PLAIN_JSON = /^application\/json(?:;[\t ]*charset=utf-8)?$/i;
/** A `Content-Length` as digits, at most five: more than BODY_LIMIT_BYTES is the parsers' 413. */
const PLAIN_LENGTH = /^\d{1,5}$/;

/** Whether a request's body is plain JSON: `application/json` in UTF-8, a Content-Length within the limit, no Content-Encoding. */
export function isPlainJson(req: IncomingMessage): boolean {
  const { headers } = req;
  const type = headers['content-type'];
  const length = headers['content-length'];
  return (
    type !== undefined &&
    length !== undefined &&
    PLAIN_JSON.test(type) &&
    PLAIN_LENGTH.test(length) &&
    Number(length) <= BODY_LIMIT_BYTES &&
    headers['transfer-encoding'] === undefined &&
    headers['content-encoding'] === undefined
  );
}

/** The requests whose body the JSON parser took (`hasJsonBody`). */
const jsonBodies = new WeakSet<IncomingMessage>();

/**
 * The body step of the HTTP contract, one function for every app and for edge's request pipeline:
 * reads the body into `req.body` (JSON, an OAuth form, or raw bytes of any other type, each at most
 * 64 KiB; none for a body of no bytes without a parsed type) and answers the parser's error (413,
 * 400, not UTF-8), or undefined. A body in plain JSON (`application/json`, UTF-8, a Content-Length
 * within the limit, no Content-Encoding) is read whole and parsed at once (`parseJsonBytes`, which
 * answers as the parser does): the parsers' streams and decoders cost more than such a request.
 */
export function readBody(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  if (isPlainJson(req)) {
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      // A client that goes away first leaves nothing to answer.
      req.once('end', () => {
        try {
          (req as IncomingMessage & { body?: unknown }).body = parseJsonBytes(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
          jsonBodies.add(req);
          resolve(undefined);
        } catch (error) {
          resolve(error);
        }
      });
    });
  }
  return new Promise((resolve) => {
    let i = 0;
    const next = (error?: unknown): void => {
      if (error !== undefined) return resolve(error);
      // The JSON parser leaves a body only when it took the request (its type, and bytes to read).
      if (i === 1 && (req as IncomingMessage & { body?: unknown }).body !== undefined) jsonBodies.add(req);
      const parser = BODY_PARSERS[i++];
      if (parser === undefined) return resolve(undefined);
      void parser(req as Request, res as Response, next);
    };
    next();
  });
}

/** Whether the body step read the request's body as JSON (`application/json` or `application/*+json`, as `req.is` would say). */
export function hasJsonBody(req: IncomingMessage): boolean {
  return jsonBodies.has(req);
}

/** The steps of `readBody` after its plain lane, in order: JSON, then an OAuth form, then any other bytes. */
const BODY_PARSERS: readonly RequestHandler[] = [
  jsonBody(),
  // OAuth endpoints (RFC 8628, RFC 7009) and human forms take form bodies.
  express.urlencoded({ limit: BODY_LIMIT_BYTES, extended: false, parameterLimit: 50 }),
  // Any other body still counts against the limit, so 413 holds whatever the content type.
  express.raw({ limit: BODY_LIMIT_BYTES, type: () => true }),
  emptyBodyIsNone,
];

/** Whether a request is a CORS preflight: only an OPTIONS naming Access-Control-Request-Method is one (Fetch standard). */
export function isPreflight(req: IncomingMessage): boolean {
  return req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
}

/** The route a request took through an express app, for its metrics and log line (`unmatched` for none). */
export function expressRoute(req: IncomingMessage): string {
  const { route, baseUrl } = req as IncomingMessage & { route?: { path?: string }; baseUrl?: string };
  return route?.path === undefined ? 'unmatched' : `${baseUrl ?? ''}${route.path}`;
}

export interface HttpApp {
  app: Express;
  /** Adds the 404 problem for unknown routes and the error handler; call after the routes. */
  finish(): void;
  /** What the error handler does with a failure, for a request answered outside the app's routes (edge's request pipeline). */
  answerError(error: unknown, req: Request, res: Response): void;
}

/**
 * An express app with the product's HTTP contract around whatever routes the service adds:
 * request ids, metrics, the daily quota with RateLimit headers on every response, a 64 KiB body
 * limit, errors as problem documents.
 */
export function createHttpApp(options: HttpContractOptions): HttpApp {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', options.trustProxy);

  const { cors, admit } = options;
  if (admit !== undefined) {
    app.use(requestContext(options.service, options.log));
    // Before admission, so that a refusal (429, 503, 413...) is readable by the browser too.
    if (cors) {
      app.use((req, res, next) => {
        if (cors(req)) for (const [name, value] of Object.entries(corsHeaders())) res.setHeader(name, value);
        next();
      });
    }
    app.use(admission(admit));
    // A preflight counts like any request (once), and is answered here, before any route's 405; a
    // plain OPTIONS goes on to its route, which answers with the methods it takes in Allow.
    if (cors) {
      app.use((req, res, next) => {
        if (!isPreflight(req) || !cors(req)) return next();
        answerPreflight(res);
      });
    }
  }
  app.use((req, res, next) => void readBody(req, res).then(next));
  if (options.idempotency) app.use(idempotency(options.idempotency, options.log));
  const answerError = errorHandler(options);
  return {
    app,
    finish() {
      app.use(notFound());
      app.use(answerError);
    },
    answerError: (error, req, res) => void answerError(error, req, res, () => undefined),
  };
}

/**
 * Request ids, the request duration metric and one log line per request when its response ends:
 * `GET /api/v1/posts 200 3.1 ms` with `requestId` and `http: {method, path, status, durationMs}`
 * (a live stream's line comes when it closes). The path goes without its query, which may carry
 * a device code; 5xx lines are warnings, a client that went away before the end is said so.
 */
function requestContext(service: string, log: Logger): RequestHandler {
  return (req, res, next) => {
    const requestId = followRequest(req, res, service, log, expressRoute);
    runWithContext({ requestId }, next);
  };
}

/** Answers a CORS preflight (`isPreflight`): 204 with the methods and headers the public API takes. */
export function answerPreflight(res: ServerResponse): void {
  for (const [name, value] of Object.entries(corsPreflightHeaders())) res.setHeader(name, value);
  res.statusCode = 204;
  res.end();
}

/**
 * Follows one request from its start (call it before anything else reads or answers it): sets
 * `X-Request-Id` (the client's when well-formed, a fresh one otherwise), and when the response ends
 * observes `http_request_duration_seconds` under `route(req)` (read then, once the route is known) and
 * writes the request's log line (see `requestContext`). Answers the request id, for
 * `runWithContext`. Every HTTP app gets it through `createHttpApp`.
 */
export function followRequest(req: IncomingMessage, res: ServerResponse, service: string, log: Logger, route: (req: IncomingMessage) => string): string {
  const requestId = requestIdFrom(req.headers[REQUEST_ID_HEADER]);
  res.setHeader('X-Request-Id', requestId);
  watchRequest(req, res, service, log, route, requestId);
  return requestId;
}

/**
 * `followRequest` without setting `X-Request-Id`: for a path that writes it with the rest of its
 * answer's headers at once (edge's request pipeline), having taken `requestId` from `requestIdFrom`.
 * `route` is one function for every request, given the request when it ends: a closure made per
 * request and kept by the response's listener keeps what it captured alive past the young
 * generation's collections, which costs more than the request (docs/decisions.md §28).
 */
export function watchRequest(
  req: IncomingMessage,
  res: ServerResponse,
  service: string,
  log: Logger,
  route: (req: IncomingMessage) => string,
  requestId: string,
): void {
  const started = process.hrtime.bigint();
  // Read now: express rewrites `req.url` under a mounted router, and the line names the path as sent.
  const { method = 'GET', url = '/' } = req;
  // One listener: 'close' follows 'finish' on every answer that completes, and comes alone when the client went away.
  res.once('close', () => {
    const elapsed = Number(process.hrtime.bigint() - started);
    const status = res.statusCode;
    const complete = res.writableFinished;
    if (complete) httpRequestDuration.observe({ service, method, route: route(req), status }, elapsed / 1e9);
    // The line is only made when it is written (the embedded default logs warnings only).
    if (status < 500 && !log.isLevelEnabled('info')) return;
    const durationMs = Math.round(elapsed / 1e5) / 10;
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    const line = `${method} ${path} ${status} ${durationMs} ms${complete ? '' : ' (client went away first)'}`;
    const fields = { requestId, http: { method, path, status, durationMs, ...(complete ? {} : { aborted: true }) } };
    if (status >= 500) log.warn(fields, line);
    else log.info(fields, line);
  });
}

export function setRateLimitHeaders(res: ServerResponse, state: QuotaState): void {
  const fields = rateLimitFields(state);
  for (let i = 0; i < fields.length; i += 2) res.setHeader(fields[i] as string, fields[i + 1] as string);
}

function admission(admit: NonNullable<HttpContractOptions['admit']>): RequestHandler {
  return async (req, res, next) => {
    let refusal: DomainError | undefined;
    try {
      refusal = await admitRequest(admit, req, res);
    } catch (error) {
      return next(error);
    }
    return next(refusal);
  };
}

/**
 * Counts one request with `admit`: its RateLimit headers and quota subject go on the response, and
 * it answers the refusal, if any. The app's admission step.
 */
async function admitRequest(admit: NonNullable<HttpContractOptions['admit']>, req: Request, res: Response): Promise<DomainError | undefined> {
  const admitted = await admit(req, res);
  setRateLimitHeaders(res, admitted.quota);
  res.locals.quotaSubject = admitted.subject;
  return admitted.refusal;
}

/** The RateLimit fields of `state`, name and value in turn, for an answer written in one `writeHead`. */
export function rateLimitFields(state: QuotaState): string[] {
  return ['RateLimit-Limit', String(state.limit), 'RateLimit-Remaining', String(state.remaining), 'RateLimit-Reset', String(state.resetSeconds)];
}

/** A full allowance until midnight, for answers whose count is unknown because storage failed. */
export function unknownQuota(limit: number): QuotaState {
  return { limit, remaining: limit, resetSeconds: 1, allowed: true };
}

/**
 * Counts a request per client address (auth's human pages, which take no bearer token): a spent
 * quota is refused with 429, and a quota store that fails answers 503 rather than stop the client for a day.
 */
export function addressAdmission(quota: QuotaStore, perAddress: number, log: Logger, service: string): HttpContractOptions['admit'] {
  return async (req) => {
    const subject = `addr:${req.ip ?? 'unknown'}`;
    try {
      const state = await quota.consume(subject, perAddress);
      if (state.allowed) return { subject, quota: state };
      quotaRejections.inc({ service });
      return { subject, quota: state, refusal: rateLimited(state) };
    } catch (error) {
      log.error({ err: error }, 'quota store failed');
      return { subject, quota: unknownQuota(perAddress), refusal: unavailable() };
    }
  };
}

/** The quota of today is spent: wait until midnight UTC. */
export function rateLimited(state: QuotaState): DomainError {
  return new DomainError('rate-limited', {
    detail: `All ${state.limit} calls of today (UTC) are spent.`,
    fields: { retry_after: state.resetSeconds, limit: state.limit },
  });
}

function notFound(): RequestHandler {
  return (req, _res, next) => {
    next(new DomainError('not-found', { detail: `Nothing answers ${req.method} ${req.path}.` }));
  };
}

interface BodyParserError {
  type?: string;
  status?: number;
}

function errorHandler(options: HttpContractOptions): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    const problem = toDomainError(error, options.log, req);
    if (res.headersSent) {
      res.end();
      return;
    }
    if (problem.slug === 'not-found' && prefersHtml((types) => req.accepts(types), req.method)) {
      sendNotFoundPage(res, problem, options.siteUrl);
      return;
    }
    sendProblem(res, problem, options.siteUrl, options.answer(problem, req));
  };
}

/** Any failure of a request as a domain error: parser errors by their type, gRPC failures by what they carried. */
export function toDomainError(error: unknown, log: Logger, req: Request): DomainError {
  if (error instanceof DomainError) return error;
  const parserError = error as BodyParserError;
  if (parserError.type === 'entity.too.large' || parserError.status === 413) {
    return new DomainError('payload-too-large', { detail: `The body is larger than ${BODY_LIMIT_BYTES} bytes.`, fields: { max_bytes: BODY_LIMIT_BYTES } });
  }
  if (parserError.type === NOT_UTF8) {
    return new DomainError('invalid-request', { detail: 'The body is not valid UTF-8.', fields: { parameter: 'body', expected: 'JSON encoded as UTF-8' } });
  }
  if (parserError.type === 'entity.parse.failed') {
    return new DomainError('parse-error', { detail: 'The body is not well-formed JSON.' });
  }
  if (parserError.type !== undefined && parserError.status !== undefined && parserError.status < 500) {
    return new DomainError('invalid-request', {
      detail: 'The body could not be read.',
      fields: { parameter: 'Content-Encoding', expected: 'identity, gzip, deflate or br' },
    });
  }
  if (isStorageUnavailable(error)) return unavailable();
  if (error instanceof Error && 'code' in error && typeof error.code === 'number') return fromServiceError(error);
  log.error({ err: error, method: req.method, path: req.path }, 'request failed');
  return fromServiceError(error);
}
