import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  answerPreflight,
  corsHeaders,
  expressRoute,
  isPreflight,
  rateLimitFields,
  readBody,
  REQUEST_ID_HEADER,
  requestIdFrom,
  runWithContext,
  watchRequest,
} from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import type { Express, Request, Response } from 'express';
import { match, type MatchFunction } from 'path-to-regexp';
import type { Admission, Core, Credentials } from '../operations/core.js';
import type { Problem } from '../operations/problem.js';
import { expressObjects, sendProblem } from './answers.js';

/**
 * Edge's one request path (docs/decisions.md §28): every request to edge enters `RequestPipeline`,
 * whose steps (request id and log line, CORS, one count against the quota with its RateLimit
 * headers, the preflight, the body, the answer's headers, problems) exist here and in kit only. The
 * routes it serves itself (every REST binding, MCP's POST) answer without express's objects; what
 * no route takes (pages, OAuth, A2A, live feeds, the 404) goes on to edge's express app, with these
 * steps already done.
 */

/** One request on its way through the pipeline: what its steps found out, and the headers they put on its answer. */
export interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly requestId: string;
  /** The path as express reads it (without the query; undefined for a URL without one), and the query string ('' for none). */
  readonly path: string | undefined;
  readonly query: string;
  /**
   * The headers every answer carries (X-Request-Id, CORS on the public API, RateLimit once counted),
   * name and value in turn: written with the answer, in one `writeHead` where it can.
   */
  readonly headers: string[];
  /** The request's count (`RequestPipeline.admit`), once made. */
  admission?: Admission;
}

/** What a route does with a request the pipeline matched; `params` are its path's, decoded. */
export type RouteHandler = (exchange: Exchange, params: Record<string, string>) => Promise<void>;

export interface PipelineRoute {
  /** An express path (`/api/v1/posts/:postId`), matched as express's router matches it: any case, a trailing slash, params decoded. */
  path: string;
  /** The methods it takes; a request with another goes on to the next route. Left out: every method. */
  methods?: readonly string[];
  /** Counts the request itself, with `admit` or as `Core.admitAndInvoke` does; otherwise the pipeline counts it first. */
  countsItself?: boolean;
  handle: RouteHandler;
}

export interface PipelineOptions {
  /** Edge's express app: what no route takes, and its prototypes for the answers only express writes. */
  app: Express;
  core: Core;
  log: Logger;
  /** Whether a path is the public API, which every origin may call (CORS). */
  publicApi(path: string): boolean;
  /** The app's error handler: a body it cannot read, and what fails unexpectedly. */
  answerError(error: unknown, req: Request, res: Response): void;
}

/** Characters for which parseurl, and so express, reads a URL with `url.parse` rather than up to its first `?`. */
const SLOW_URL = /[\t\n\f\r #\u00a0\ufeff]/;

/** A path's parameter decoded as express's router decodes it: a malformed escape is its 400 error. */
function decodeParam(value: string): string {
  if (value.length === 0 || !value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch (error) {
    if (error instanceof URIError) Object.assign(error, { message: `Failed to decode param '${value}'`, status: 400, statusCode: 400 });
    throw error;
  }
}

/** A route's path as express's router (strict off, case-insensitive, at the end of the URL) matches it. */
function matcherOf(path: string): MatchFunction<Record<string, string>> {
  return match<Record<string, string>>(path === '/' ? path : path.replace(/\/+$/, ''), { sensitive: false, end: true, trailing: true, decode: decodeParam });
}

/** The parameters of a literal path. */
const NO_PARAMS: Record<string, string> = Object.freeze({});

/** How many (peer, X-Forwarded-For) pairs the client addresses remember before starting over. */
const CLIENT_ADDRESSES_KEPT = 1024;

export class RequestPipeline {
  private readonly routes: { route: PipelineRoute; match: MatchFunction<Record<string, string>> }[] = [];
  /** Routes of a literal path (no parameter) that no earlier route also matches, by that path as written: found without a regular expression. */
  private readonly literals = new Map<string, PipelineRoute>();
  private readonly corsFlat = Object.entries(corsHeaders()).flat();
  /** Client addresses by peer and X-Forwarded-For: the same clients call again and again, through the same router connections. */
  private readonly addresses = new Map<string, string>();

  constructor(private readonly options: PipelineOptions) {}

  /** Adds routes, taken in the order added, before the express app. */
  add(...routes: PipelineRoute[]): void {
    for (const route of routes) {
      const literal = !/[:*{}()?+\\]/.test(route.path);
      if (literal && !this.literals.has(route.path) && !this.routes.some(({ match: matches }) => matches(route.path) !== false))
        this.literals.set(route.path, route);
      this.routes.push({ route, match: matcherOf(route.path) });
    }
  }

  /** The node:http request handler of edge. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    const { path, query } = this.pathAndQuery(req.url ?? '/');
    const requestId = requestIdFrom(req.headers[REQUEST_ID_HEADER]);
    const exchange: Exchange = { req, res, requestId, path, query, headers: ['X-Request-Id', requestId] };
    // On every answer of the public API, errors included, so that a browser can read them too.
    if (path !== undefined && this.options.publicApi(path)) exchange.headers.push(...this.corsFlat);
    watchRequest(req, res, 'edge', this.options.log, this.routeOf, requestId);
    runWithContext({ requestId }, () => this.serve(exchange)).catch((error: unknown) => this.fail(exchange, error));
  };

  private async serve(exchange: Exchange): Promise<void> {
    const { req, path } = exchange;
    // A preflight counts like any request (once), and is answered before any route's 405.
    if (isPreflight(req) && path !== undefined && this.options.publicApi(path)) {
      await this.admit(exchange);
      this.applyHeaders(exchange);
      answerPreflight(exchange.res);
      return;
    }
    const method = req.method ?? 'GET';
    if (path !== undefined) {
      // The path exactly as a route's is written (the most frequent case) is that route's, when it takes the method.
      const literal = this.literals.get(path);
      if (literal !== undefined && (literal.methods === undefined || literal.methods.includes(method))) {
        if (literal.countsItself !== true) await this.admit(exchange);
        return literal.handle(exchange, NO_PARAMS);
      }
      for (const { route, match: matches } of this.routes) {
        if (route.methods !== undefined && !route.methods.includes(method)) continue;
        let matched: ReturnType<typeof matches>;
        try {
          matched = matches(path);
        } catch (error) {
          // Counted like any request, then answered as the app answers a path it cannot decode.
          await this.admit(exchange);
          throw error;
        }
        if (matched === false) continue;
        if (route.countsItself !== true) await this.admit(exchange);
        return route.handle(exchange, matched.params);
      }
    }
    await this.admit(exchange);
    this.toApp(exchange);
  }

  /**
   * The route a request took, for its metrics, read when its answer ends: express's, when it went
   * there; else the pipeline's, found again from the URL (a literal path in one lookup). Nothing is
   * kept on or beside the request: a property added to node's request changes its shape and slows
   * every request after it, and a WeakMap entry per request costs more than this lookup (docs/decisions.md §28).
   */
  private readonly routeOf = (req: IncomingMessage): string => {
    const route = expressRoute(req);
    if (route !== 'unmatched') return route;
    const { path } = this.pathAndQuery(req.url ?? '/');
    if (path === undefined) return route;
    const method = req.method ?? 'GET';
    const literal = this.literals.get(path);
    if (literal !== undefined && (literal.methods === undefined || literal.methods.includes(method))) return literal.path;
    for (const { route: candidate, match: matches } of this.routes) {
      if (candidate.methods !== undefined && !candidate.methods.includes(method)) continue;
      try {
        if (matches(path) !== false) return candidate.path;
      } catch {
        return route;
      }
    }
    return route;
  };

  /** The admission step: authenticates and counts the request once, and puts its RateLimit headers on the answer. */
  admit(exchange: Exchange): Promise<Admission> {
    return this.options.core.admit(this.credentials(exchange)).then((admission) => {
      this.admitted(exchange, admission);
      return admission;
    });
  }

  /** Puts a count made with the operation (`Core.admitAndInvoke`) on the answer, as `admit` does. */
  admitted(exchange: Exchange, admission: Admission): void {
    exchange.admission = admission;
    for (const field of rateLimitFields(admission.quota)) exchange.headers.push(field);
  }

  /** Who a request comes from, as the pipeline's core reads it. */
  credentials(exchange: Exchange): Credentials {
    const { req } = exchange;
    const url = req.url ?? '';
    const mark = url.indexOf('?');
    return { authorization: req.headers.authorization, address: this.address(req), path: mark === -1 ? url : url.slice(0, mark) };
  }

  /** The body step (kit's `readBody`, the same as the app's): the parser's error, or undefined with `req.body` set. */
  body(exchange: Exchange): Promise<unknown> {
    return readBody(exchange.req, exchange.res);
  }

  /** Writes the head of an answer: the steps' headers, then `fields` (name and value in turn), at once. */
  head(exchange: Exchange, status: number, fields: readonly string[]): void {
    const { headers } = exchange;
    for (const field of fields) headers.push(field);
    exchange.res.writeHead(status, headers);
  }

  /** Writes a problem as every HTTP answer of one: RFC 9457 JSON with its status and headers, after the steps' headers. */
  problem(exchange: Exchange, problem: Problem): void {
    this.applyHeaders(exchange);
    sendProblem(exchange.res, problem);
  }

  /** The request and response as express's, with the steps' headers and admission on them: for an answer only express writes. */
  toExpress(exchange: Exchange): { req: Request; res: Response } {
    this.applyHeaders(exchange);
    const objects = expressObjects(this.options.app, exchange.req, exchange.res);
    objects.res.locals.admission = exchange.admission;
    return objects;
  }

  /** Hands the request to the express app, its steps done: the app reads the body and runs its routes. */
  toApp(exchange: Exchange): void {
    const { req, res } = this.toExpress(exchange);
    this.options.app(req, res);
  }

  /** What fails unexpectedly, or a body or path that cannot be read: answered by the app's error handler. */
  fail(exchange: Exchange, error: unknown): void {
    const { req, res } = this.toExpress(exchange);
    this.options.answerError(error, req, res);
  }

  /** Puts the steps' headers on the response, for an answer written header by header. */
  applyHeaders(exchange: Exchange): void {
    const { res, headers } = exchange;
    if (res.headersSent) return;
    for (let i = 0; i < headers.length; i += 2) res.setHeader(headers[i] as string, headers[i + 1] as string);
  }

  /** A URL's path and query as express reads them (parseurl: `req.path`, and the query its parser reads). */
  private pathAndQuery(url: string): { path: string | undefined; query: string } {
    if (url.charCodeAt(0) === 0x2f && !SLOW_URL.test(url)) {
      const mark = url.indexOf('?');
      return mark === -1 ? { path: url, query: '' } : { path: url.slice(0, mark), query: url.slice(mark + 1) };
    }
    // Anything else (an absolute URL, a fragment, a space) as express itself reads it: parseurl keeps what it parsed on the request.
    const probe = Object.create(this.options.app.request, { url: { value: url, writable: true } }) as Request & { _parsedUrl?: { query?: string | null } };
    const path = probe.path as string | undefined;
    return { path, query: probe._parsedUrl?.query ?? '' };
  }

  /**
   * The client's address as express reads it (`req.ip`: its `trust proxy` walk over X-Forwarded-For),
   * remembered by what it depends on: the peer's address and the X-Forwarded-For header.
   */
  private address(req: IncomingMessage): string {
    const key = `${req.socket.remoteAddress ?? ''}\n${req.headers['x-forwarded-for'] ?? ''}`;
    let address = this.addresses.get(key);
    if (address === undefined) {
      // Express's own getter, on an object that has only what it reads: the headers and the socket.
      const probe = Object.create(this.options.app.request, { headers: { value: req.headers }, socket: { value: req.socket } }) as Request;
      address = probe.ip ?? 'unknown';
      if (this.addresses.size >= CLIENT_ADDRESSES_KEPT) this.addresses.clear();
      this.addresses.set(key, address);
    }
    return address;
  }
}
