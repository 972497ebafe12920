import { parse as parseQuery } from 'node:querystring';
import { hasJsonBody, IDEMPOTENCY_HEADER } from '@agentroom/kit/http';
import { DomainError } from '@agentroom/kit/problems';
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import type { Core, Outcome } from '../operations/core.js';
import { asksNoCache, JSON_CONTENT_TYPE, jsonBytes, otherMethods } from '../http/answers.js';
import type { Exchange, PipelineRoute, RequestPipeline } from '../http/pipeline.js';
import type { Surface } from '../operations/surface.js';
import { REST_BINDINGS, type RestBase, type RestBinding } from '@agentroom/api';

/**
 * The HTTP methods each REST method of the table answers (GET answers HEAD too, as express does): a
 * method added to `RestRoute['method']` without its entry here is a type error, never a route that
 * falls through to another method.
 */
const HTTP_METHODS: Record<RestBinding['method'], readonly string[]> = {
  GET: ['GET', 'HEAD'],
  POST: ['POST'],
  DELETE: ['DELETE'],
};

/** The base type of a field, under `.optional()` and `.default()`. */
function baseType(schema: z.ZodType): z.ZodType {
  let inner = schema;
  while (inner instanceof z.ZodOptional || inner instanceof z.ZodDefault || inner instanceof z.ZodNullable) inner = inner.unwrap() as z.ZodType;
  return inner;
}

const NUMBER = /^-?\d{1,15}(\.\d+)?$/;

/** A query string of `name=value` pairs in characters no parser decodes (`&`-separated, `=` in each). */
const PLAIN_QUERY = /^[A-Za-z0-9_.~-]+=[A-Za-z0-9_.~-]*(?:&[A-Za-z0-9_.~-]+=[A-Za-z0-9_.~-]*)*$/;

/** The input fields of an operation that are numbers, which a query string carries as text. */
function numberFields(binding: RestBinding, core: Core): ReadonlySet<string> {
  const shape = core.operations[binding.operation].input.shape as Record<string, z.ZodType>;
  return new Set(Object.keys(shape).filter((name) => baseType(shape[name] as z.ZodType) instanceof z.ZodNumber));
}

/**
 * A query string as the operation's input, parsed as express's query parser parses it (node's
 * querystring): numbers where the schema has numbers, everything else as sent (so `limit=abc` or a
 * repeated `limit` still fails validation and is named in the problem).
 */
function queryInput(numbers: ReadonlySet<string>, query: string): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  if (query === '') return input;
  // Names and values that no parser decodes differently (no `%`, `+`, repeats or empty names): read as they are.
  if (PLAIN_QUERY.test(query)) {
    for (const pair of query.split('&')) {
      const equals = pair.indexOf('=');
      const name = pair.slice(0, equals);
      if (Object.hasOwn(input, name)) return queryInput(numbers, `${query}&`);
      const value = pair.slice(equals + 1);
      input[name] = numbers.has(name) && NUMBER.test(value) ? Number(value) : value;
    }
    return input;
  }
  for (const [name, value] of Object.entries(parseQuery(query))) {
    input[name] = numbers.has(name) && typeof value === 'string' && NUMBER.test(value) ? Number(value) : value;
  }
  return input;
}

/** A JSON body as the operation's input, with the path's parameters. */
function bodyInput(body: unknown, params: Record<string, string>): unknown {
  // No body (or one of no bytes: kit's parsers leave none) is an empty input, with the path's
  // parameters; a JSON object is the input; anything else (a JSON array) fails validation as sent.
  if (body === undefined) return { ...params };
  if (typeof body === 'object' && body !== null && !Array.isArray(body) && !Buffer.isBuffer(body)) return { ...(body as Record<string, unknown>), ...params };
  return body;
}

/** The request's `Idempotency-Key`, as the pipeline takes it. */
function idempotencyKeyOf(req: IncomingMessage): string | undefined {
  const key = req.headers[IDEMPOTENCY_HEADER];
  // A header sent twice arrives as one comma-joined string, which the pipeline refuses as a key.
  return Array.isArray(key) ? key.join(',') : key;
}

/** Whether a request's body, if it has one, is JSON. A POST without a body (or with an empty one) is left to validation. */
function isJsonBody(req: IncomingMessage & { body?: unknown }): boolean {
  // Untyped bytes read to none (chunked or not) leave no body (kit's parsers); a typed one says `Content-Length: 0`.
  return req.body === undefined || req.headers['content-length'] === '0' || hasJsonBody(req);
}

/** `Cache-Control: no-cache` as the `fresh` module finds it in a request. */
const NO_CACHE = /(?:^|,)\s*?no-cache\s*?(?:,|$)/;

/**
 * Whether a GET or HEAD would be answered 304 by express (`req.fresh`): REST's answers carry no
 * ETag or Last-Modified, so only `If-None-Match: *` holds, unless the request says `no-cache`.
 */
function isFresh(req: IncomingMessage): boolean {
  if (req.headers['if-none-match'] !== '*') return false;
  const cacheControl = req.headers['cache-control'];
  return cacheControl === undefined || !NO_CACHE.test(cacheControl);
}

/**
 * The REST adapter: each binding of the table (`REST_BINDINGS`) is served by edge's request pipeline
 * (http/pipeline.ts), one route per path below its base (`{base_url}` first, then `{api_url}`),
 * taking the methods of its bindings; any other method is answered 405 (OPTIONS: 204), with Allow.
 * Nothing here checks a token, a scope, a quota or a key: the operation pipeline (`Core`) did.
 */
export function restRoutes(core: Core, surface: Surface, pipeline: RequestPipeline, mounts: Record<RestBase, string>): PipelineRoute[] {
  /** Writes what the operation pipeline answered for `binding`: its problem, or its output with the binding's status and headers. */
  const answer = (exchange: Exchange, binding: RestBinding, outcome: Outcome<unknown>): void => {
    if (!outcome.ok) return pipeline.problem(exchange, outcome.problem);
    const fields: string[] = [];
    if (outcome.replayed) fields.push('Idempotent-Replayed', 'true');
    if (binding.noStore?.(outcome.output)) fields.push('Cache-Control', 'no-store');
    const status = typeof binding.status === 'function' ? binding.status(outcome.output) : (binding.status ?? 200);
    const { req, res } = exchange;
    if ((req.method === 'GET' || req.method === 'HEAD') && status >= 200 && status < 300 && isFresh(req)) {
      pipeline.head(exchange, 304, fields);
      res.end();
      return;
    }
    const body = jsonBytes(outcome.output);
    // A HEAD's answer has the same head, and node writes no body for it.
    pipeline.head(exchange, status, [...fields, 'Content-Type', JSON_CONTENT_TYPE, 'Content-Length', String(body.length)]);
    res.end(body);
  };

  /**
   * A body sent where none is taken (a GET, a DELETE, a method answered 405) is still read by the
   * body step, which refuses it as it refuses any (413, 400) before the route answers.
   */
  const readIgnoredBody = async (exchange: Exchange): Promise<void> => {
    const unreadable = await pipeline.body(exchange);
    if (unreadable !== undefined) throw unreadable;
  };
  const hasBody = ({ headers }: IncomingMessage): boolean => headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined;

  /** One binding's handler: hands its input to the operation pipeline and writes what comes back. */
  const handlerOf = (binding: RestBinding): ((exchange: Exchange, params: Record<string, string>) => Promise<void>) => {
    if (binding.from === 'query') {
      const numbers = numberFields(binding, core);
      const withParams = binding.path.includes(':');
      return async (exchange, params) => {
        const admission = await pipeline.admit(exchange);
        if (hasBody(exchange.req)) await readIgnoredBody(exchange);
        const input = withParams ? { ...queryInput(numbers, exchange.query), ...params } : queryInput(numbers, exchange.query);
        answer(
          exchange,
          binding,
          await core.invoke(admission, binding.operation, input, { surface, readThrough: asksNoCache(exchange.req.headers['cache-control']) }),
        );
      };
    }
    return async (exchange, params) => {
      const req = exchange.req as IncomingMessage & { body?: unknown };
      const unreadable = await pipeline.body(exchange);
      if (unreadable !== undefined) {
        // Counted like any request, then answered as the app answers a body it cannot read.
        await pipeline.admit(exchange);
        throw unreadable;
      }
      // JSON only: a form or text body is refused before anything reads it (docs/decisions.md §2).
      if (!isJsonBody(req)) {
        await pipeline.admit(exchange);
        const type = req.headers['content-type'] ?? '';
        const error = new DomainError('unsupported-media-type', {
          detail: `The body is ${type === '' ? 'sent without a Content-Type' : JSON.stringify(type)}; this endpoint takes application/json.`,
          fields: { parameter: 'Content-Type', expected: 'application/json' },
        });
        return pipeline.problem(exchange, core.problem(error, surface, binding.operation));
      }
      // The count and the idempotency claim go to the store together: one round trip where it can.
      const { admission, outcome } = await core.admitAndInvoke(pipeline.credentials(exchange), binding.operation, bodyInput(req.body, params), {
        surface,
        idempotencyKey: binding.method === 'POST' ? idempotencyKeyOf(req) : undefined,
        readThrough: asksNoCache(req.headers['cache-control']),
      });
      pipeline.admitted(exchange, admission);
      answer(exchange, binding, outcome);
    };
  };

  /** A route of the pipeline for the bindings of one path, at `path` below the base. */
  const routeOf = (path: string, bindings: readonly RestBinding[]): PipelineRoute => {
    const handlers = new Map<string, (exchange: Exchange, params: Record<string, string>) => Promise<void>>();
    for (const binding of bindings) {
      const handler = handlerOf(binding);
      for (const method of HTTP_METHODS[binding.method]) if (!handlers.has(method)) handlers.set(method, handler);
    }
    const other = otherMethods(core, surface, [...handlers.keys()].sort());
    const refuse = async (exchange: Exchange): Promise<void> => {
      await pipeline.admit(exchange);
      if (hasBody(exchange.req)) await readIgnoredBody(exchange);
      pipeline.applyHeaders(exchange);
      other(exchange.req, exchange.res);
    };
    return {
      path,
      countsItself: true,
      handle: (exchange, params) => {
        const handler = handlers.get(exchange.req.method ?? '');
        return handler === undefined ? refuse(exchange) : handler(exchange, params);
      },
    };
  };

  const routes: PipelineRoute[] = [];
  for (const base of ['base', 'api'] as const) {
    const bindings = REST_BINDINGS.filter((b) => b.base === base);
    for (const path of new Set(bindings.map((b) => b.path)))
      routes.push(
        routeOf(
          `${mounts[base]}${path}`,
          bindings.filter((b) => b.path === path),
        ),
      );
  }
  // {api_url} itself, the resource the OAuth metadata names, answers what {base_url} does (at a
  // host's root, `/` is the room's page).
  const index = REST_BINDINGS.find((binding) => binding.operation === 'apiIndex');
  if (mounts.api !== '' && index !== undefined) routes.push(routeOf(mounts.api, [index]));
  return routes;
}
