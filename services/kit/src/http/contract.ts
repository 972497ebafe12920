import express, { type ErrorRequestHandler, type Express, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { REQUEST_ID_HEADER, requestIdFrom, runWithContext } from '../context.js';
import type { Logger } from '../log.js';
import { httpRequestDuration, quotaRejections } from '../metrics.js';
import { DomainError } from '../problems.js';
import type { QuotaState, QuotaStore } from '../store/quota.js';
import { isStorageUnavailable } from '../store/redis.js';
import { fromServiceError } from '../grpc/status.js';
import { sendProblem } from './problem.js';
import { idempotency } from './idempotency.js';
import type { IdempotencyStore } from '../store/idempotency.js';

/** Largest request body accepted, any content type (CONTRACT §6). */
export const BODY_LIMIT_BYTES = 64 * 1024;

/** What one call counts against: `tok:<id>` with the token quota, or `addr:<ip>` with the address quota. */
export interface QuotaSubject {
  subject: string;
  limit: number;
}

export interface HttpContractOptions {
  service: string;
  siteUrl: string;
  log: Logger;
  quota: QuotaStore;
  /** Daily calls per client address for calls without a token. */
  quotaPerAddress: number;
  /** Express `trust proxy`: which hops may set X-Forwarded-For (our router and Envoy). */
  trustProxy: string;
  /**
   * Who is calling, for the quota: a token's subject and limit, or undefined for "count it per
   * client address". It may throw a DomainError (a bad token): the call is then counted per
   * address and answered with that error, RateLimit headers included.
   */
  identify?: (req: Request, res: Response) => Promise<QuotaSubject | undefined>;
  /** Where Idempotency-Key records live; every POST honours the header. */
  idempotency: IdempotencyStore;
  /** What the 404 problem tells the caller to do: where the real routes are. */
  notFoundRemedy: string;
}

export interface HttpApp {
  app: Express;
  /** Adds the 404 problem for unknown routes and the error handler; call after the routes. */
  finish(): void;
}

/**
 * An express app with the product's HTTP contract around whatever routes the service adds:
 * request ids, metrics, the daily quota with RateLimit headers on every response, a 64 KiB body
 * limit, JSON parse errors as problems.
 */
export function createHttpApp(options: HttpContractOptions): HttpApp {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', options.trustProxy);

  app.use(requestContext(options.service));
  app.use(quota(options));
  app.use(
    express.json({ limit: BODY_LIMIT_BYTES, type: ['application/json', 'application/*+json'] }),
    // OAuth endpoints (RFC 8628, RFC 7009) take form bodies.
    express.urlencoded({ limit: BODY_LIMIT_BYTES, extended: false, parameterLimit: 50 }),
    // Any other body still counts against the limit, so 413 holds whatever the content type.
    express.raw({ limit: BODY_LIMIT_BYTES, type: () => true }),
  );
  app.use(idempotency(options.idempotency, options.log));
  return {
    app,
    finish() {
      app.use(notFound(options.notFoundRemedy));
      app.use(errorHandler(options));
    },
  };
}

function requestContext(service: string): RequestHandler {
  return (req, res, next) => {
    const requestId = requestIdFrom(req.headers[REQUEST_ID_HEADER]);
    res.setHeader('X-Request-Id', requestId);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const route = (req.route as { path?: string } | undefined)?.path;
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      httpRequestDuration.observe(
        { service, method: req.method, route: route === undefined ? 'unmatched' : `${req.baseUrl}${route}`, status: res.statusCode },
        seconds,
      );
    });
    runWithContext({ requestId }, next);
  };
}

export function setRateLimitHeaders(res: Response, state: QuotaState): void {
  res.setHeader('RateLimit-Limit', String(state.limit));
  res.setHeader('RateLimit-Remaining', String(state.remaining));
  res.setHeader('RateLimit-Reset', String(state.resetSeconds));
}

function quota(options: HttpContractOptions): RequestHandler {
  return async (req: Request, res: Response, next: NextFunction) => {
    const byAddress: QuotaSubject = { subject: `addr:${req.ip ?? 'unknown'}`, limit: options.quotaPerAddress };
    let chosen = byAddress;
    let refused: unknown;
    try {
      chosen = (await options.identify?.(req, res)) ?? byAddress;
    } catch (error) {
      refused = error;
    }
    let state: QuotaState;
    try {
      state = await options.quota.consume(chosen.subject, chosen.limit);
    } catch (error) {
      options.log.error({ err: error }, 'quota store failed');
      // The count is unknown; say so with a full allowance rather than tell the client to stop for a day.
      setRateLimitHeaders(res, { limit: chosen.limit, remaining: chosen.limit, resetSeconds: 1, allowed: true });
      return next(unavailable());
    }
    setRateLimitHeaders(res, state);
    res.locals.quotaSubject = chosen.subject;
    if (refused !== undefined) return next(refused);
    if (!state.allowed) {
      quotaRejections.inc({ service: options.service });
      return next(
        new DomainError('rate-limited', {
          detail: `All ${state.limit} calls of today (UTC) are spent.`,
          remedy: `Wait ${state.resetSeconds} seconds, until midnight UTC, when the quota resets; see RateLimit-Reset.`,
          headers: { 'Retry-After': String(state.resetSeconds) },
        }),
      );
    }
    return next();
  };
}

function unavailable(): DomainError {
  return new DomainError('unavailable', {
    detail: 'Storage did not answer.',
    remedy: 'Retry in a few seconds with exponential backoff.',
    headers: { 'Retry-After': '5' },
  });
}

function notFound(remedy: string): RequestHandler {
  return (req, _res, next) => {
    next(
      new DomainError('not-found', {
        detail: `Nothing answers ${req.method} ${req.path}.`,
        remedy,
      }),
    );
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
    sendProblem(res, problem, options.siteUrl);
  };
}

function toDomainError(error: unknown, log: Logger, req: Request): DomainError {
  if (error instanceof DomainError) return error;
  const parserError = error as BodyParserError;
  if (parserError.type === 'entity.too.large' || parserError.status === 413) {
    return new DomainError('payload-too-large', {
      detail: `The body is larger than ${BODY_LIMIT_BYTES} bytes.`,
      remedy: `Send a body of at most ${BODY_LIMIT_BYTES} bytes (64 KiB).`,
    });
  }
  if (parserError.type === 'entity.parse.failed') {
    return new DomainError('parse-error', {
      detail: 'The body is not well-formed JSON.',
      remedy: 'Send a well-formed JSON body with Content-Type: application/json.',
    });
  }
  if (parserError.type !== undefined && parserError.status !== undefined && parserError.status < 500) {
    return new DomainError('invalid-request', {
      detail: 'The body could not be read.',
      remedy: 'Send a JSON body with Content-Type: application/json and a supported encoding (identity, gzip, deflate, br).',
    });
  }
  if (isStorageUnavailable(error)) return unavailable();
  if (error instanceof Error && 'code' in error && typeof error.code === 'number') return fromServiceError(error);
  log.error({ err: error, method: req.method, path: req.path }, 'request failed');
  return fromServiceError(error);
}
