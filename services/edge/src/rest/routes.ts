import { IDEMPOTENCY_HEADER } from '@agentroom/kit/http';
import { DomainError } from '@agentroom/kit/problems';
import { type Request, type Response, Router } from 'express';
import { z } from 'zod';
import type { Core, Outcome } from '../operations/core.js';
import { admissionOf, asksNoCache, otherMethods, sendJson, sendProblem } from '../http/answers.js';
import type { Surface } from '../operations/surface.js';
import { REST_BINDINGS, type RestBase, type RestBinding } from '@agentroom/api';

/** The base type of a field, under `.optional()` and `.default()`. */
function baseType(schema: z.ZodType): z.ZodType {
  let inner = schema;
  while (inner instanceof z.ZodOptional || inner instanceof z.ZodDefault || inner instanceof z.ZodNullable) inner = inner.unwrap() as z.ZodType;
  return inner;
}

const NUMBER = /^-?\d{1,15}(\.\d+)?$/;

/**
 * A query string as the operation's input: numbers where the schema has numbers, everything else
 * as sent (so `limit=abc` or a repeated `limit` still fails validation and is named in the problem).
 */
function queryInput(binding: RestBinding, core: Core, query: Record<string, unknown>): Record<string, unknown> {
  const shape = core.operations[binding.operation].input.shape as Record<string, z.ZodType>;
  const input: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(query)) {
    const field = shape[name];
    input[name] = field !== undefined && baseType(field) instanceof z.ZodNumber && typeof value === 'string' && NUMBER.test(value) ? Number(value) : value;
  }
  return input;
}

/** A request's input for the operation of `binding`: its query or its JSON body, with the path's parameters. */
export function inputOf(binding: RestBinding, core: Core, req: Request): unknown {
  const params = req.params as Record<string, string>;
  if (binding.from === 'query') return { ...queryInput(binding, core, req.query as Record<string, unknown>), ...params };
  const body: unknown = req.body;
  // No body (or one of no bytes: kit's parsers leave none) is an empty input, with the path's
  // parameters; a JSON object is the input; anything else (a JSON array) fails validation as sent.
  if (body === undefined) return { ...params };
  if (typeof body === 'object' && body !== null && !Array.isArray(body) && !Buffer.isBuffer(body)) return { ...(body as Record<string, unknown>), ...params };
  return body;
}

/**
 * The handler of one REST binding: hands its input to the pipeline and writes what comes back.
 * Nothing here checks a token, a scope, a quota or a key: the pipeline did. Express routes call it
 * (`restRoutes`), and so do edge's lean reads (`rest/lean.ts`), so both answer alike.
 */
export function restHandler(core: Core, surface: Surface, binding: RestBinding): (req: Request, res: Response) => Promise<void> {
  return async (req, res) => {
    // JSON only: a form or text body is refused before anything reads it (docs/decisions.md §2).
    if (binding.from === 'body' && !isJsonBody(req)) {
      const type = req.headers['content-type'] ?? '';
      const error = new DomainError('unsupported-media-type', {
        detail: `The body is ${type === '' ? 'sent without a Content-Type' : JSON.stringify(type)}; this endpoint takes application/json.`,
        fields: { parameter: 'Content-Type', expected: 'application/json' },
      });
      return sendProblem(res, core.problem(error, surface, binding.operation));
    }
    const outcome = await core.invoke(admissionOf(res), binding.operation, inputOf(binding, core, req), {
      surface,
      idempotencyKey: binding.method === 'POST' ? idempotencyKeyOf(req) : undefined,
      readThrough: asksNoCache(req.headers['cache-control']),
    });
    answerOutcome(res, binding, outcome);
  };
}

/** The request's `Idempotency-Key`, as the pipeline takes it. */
export function idempotencyKeyOf(req: Request): string | undefined {
  const key = req.headers[IDEMPOTENCY_HEADER];
  // A header sent twice arrives as one comma-joined string, which the pipeline refuses as a key.
  return Array.isArray(key) ? key.join(',') : key;
}

/** Writes what the pipeline answered for `binding`: its problem, or its output with the binding's status and headers. */
export function answerOutcome(res: Response, binding: RestBinding, outcome: Outcome<unknown>): void {
  if (!outcome.ok) return sendProblem(res, outcome.problem);
  if (outcome.replayed) res.setHeader('Idempotent-Replayed', 'true');
  if (binding.noStore?.(outcome.output)) res.setHeader('Cache-Control', 'no-store');
  const status = typeof binding.status === 'function' ? binding.status(outcome.output) : (binding.status ?? 200);
  sendJson(res, status, outcome.output);
}

/**
 * The REST adapter for one base (`{base_url}` or `{api_url}`): each binding becomes an express route
 * running its `restHandler`, and a known path with another method answers 405.
 */
export function restRoutes(core: Core, surface: Surface, base: RestBase): Router {
  const router = Router();
  const bindings = REST_BINDINGS.filter((b) => b.base === base);
  for (const binding of bindings) {
    const handler = restHandler(core, surface, binding);
    if (binding.method === 'GET') router.get(binding.path, handler);
    else if (binding.method === 'DELETE') router.delete(binding.path, handler);
    else router.post(binding.path, handler);
  }
  // A known path with another method: 405 with the methods it takes (GET answers HEAD too); OPTIONS lists them.
  for (const path of new Set(bindings.map((b) => b.path))) {
    const methods = [...new Set(bindings.filter((b) => b.path === path).flatMap((b) => (b.method === 'GET' ? ['GET', 'HEAD'] : [b.method])))].sort();
    router.all(path, otherMethods(core, surface, methods));
  }
  return router;
}

/** Whether a request's body, if it has one, is JSON. A POST without a body (or with an empty one) is left to validation. */
function isJsonBody(req: Request): boolean {
  // Untyped bytes read to none (chunked or not) leave no body (kit's parsers); a typed one says `Content-Length: 0`.
  if (req.body === undefined || req.headers['content-length'] === '0') return true;
  return typeof req.is(['application/json', 'application/*+json']) === 'string';
}
