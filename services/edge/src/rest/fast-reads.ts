import type { IncomingMessage, ServerResponse } from 'node:http';
import { corsHeaders, recordAdmission, REQUEST_ID_HEADER, requestIdFrom, runWithContext, watchRequest } from '@agentroom/kit/http';
import { REST_BINDINGS } from '@agentroom/api';
import type { Request, Response } from 'express';
import { asksNoCache, type FastPathOptions, JSON_CONTENT_TYPE, jsonBytes, leadingHeaders, sendProblem } from '../http/answers.js';

/** `path` is the literal path of `GET {base_url}/posts`; `surface` REST's. */
export interface FastReadsOptions extends FastPathOptions {
  /** The app's error handler, for what fails unexpectedly. */
  answerError(error: unknown, req: Request, res: Response): void;
}

/** The input of listPosts in a query string: `limit` and `cursor`, each at most once. */
interface ListInput {
  limit?: number;
  cursor?: string;
}

/** A limit as the query parser and the pipeline read it (a whole number; its range is the pipeline's to judge). */
const LIMIT = /^\d{1,15}$/;
/** A cursor as the room signs them (base64url), which no query parser decodes differently. */
const CURSOR = /^[A-Za-z0-9_-]{1,256}$/;

/**
 * listPosts' input from a query string in its plainest form (`limit=20`, `cursor=…`, both, or
 * none), read exactly as express's query parser and REST's adapter would read it; `undefined` for
 * anything else (a repeated or unknown parameter, percent-encoding, an empty value), which the
 * app's own path reads.
 */
function plainInput(query: string): ListInput | undefined {
  const input: ListInput = {};
  if (query === '') return input;
  for (const pair of query.split('&', 3)) {
    const equals = pair.indexOf('=');
    const name = pair.slice(0, equals);
    const value = pair.slice(equals + 1);
    if (name === 'limit' && input.limit === undefined && LIMIT.test(value)) input.limit = Number(value);
    else if (name === 'cursor' && input.cursor === undefined && CURSOR.test(value)) input.cursor = value;
    else return undefined;
  }
  return input;
}

/**
 * The fast path of `GET {base_url}/posts`, the room's most frequent request: the same contract steps
 * as the app's and the same pipeline (`Core.admit`, then `Core.invoke` of listPosts: token, quota,
 * validation, the first page or the page after a cursor from edge's memory), but with none of
 * express's objects on the way to a success: its answer is written in one `writeHead` and one `end`,
 * the body being the bytes kept for the page object (`jsonBytes`), and the headers exactly the app's
 * (X-Request-Id, CORS, RateLimit, Content-Type, Content-Length, in the same order). Express's
 * request and response prototypes, swapped in per request, cost more than the rest of such a
 * request (V8 drops its inline caches for objects whose prototype changes).
 *
 * It takes what `leanReads` takes, when the query string is in its plainest form and the client's
 * address is known without express (its peer and X-Forwarded-For seen before); a problem (a
 * spent quota, a bad limit or cursor) is written by express's response, as the app writes it.
 * Answers whether it took the request.
 */
export function fastReads(options: FastReadsOptions): (req: IncomingMessage, res: ServerResponse, query: string) => boolean {
  const { core, surface, log, path } = options;
  const binding = REST_BINDINGS.find((b) => b.operation === 'listPosts' && b.method === 'GET');
  // What a success of the app's route writes beyond the JSON (restHandler): nothing, for this binding.
  if (!binding || binding.status !== undefined || binding.noStore !== undefined) throw new Error('the REST table binds GET /posts with a status or Cache-Control this path does not write');
  const cors = Object.entries(corsHeaders());
  const corsFlat = cors.flat();
  const route = (): string => path;

  const serve = async (incoming: IncomingMessage, outgoing: ServerResponse, requestId: string, address: string, input: ListInput): Promise<void> => {
    const { headers } = incoming;
    const admission = await core.admit({ authorization: headers.authorization, address, path });
    const outcome = await core.invoke(admission, 'listPosts', input, { surface, readThrough: asksNoCache(headers['cache-control']) });
    const { quota } = admission;
    if (outcome.ok) {
      const body = jsonBytes(outcome.output);
      outgoing.writeHead(200, [
        ...leadingHeaders(requestId, corsFlat, quota),
        'Content-Type',
        JSON_CONTENT_TYPE,
        'Content-Length',
        String(body.length),
      ]);
      outgoing.end(body);
      return;
    }
    const res = expressResponse(incoming, outgoing, requestId);
    res.locals.admission = admission;
    recordAdmission(res, admission);
    sendProblem(res, outcome.problem);
  };

  /** Express's response with what the app's earlier steps would have put on it (request id, CORS). */
  const expressResponse = (incoming: IncomingMessage, outgoing: ServerResponse, requestId: string): Response => {
    const { res } = options.asExpress(incoming, outgoing);
    if (!res.headersSent) {
      res.setHeader('X-Request-Id', requestId);
      for (const [name, value] of cors) res.setHeader(name, value);
    }
    return res;
  };

  return (incoming, outgoing, query) => {
    const input = plainInput(query);
    if (input === undefined) return false;
    const address = options.knownAddress(incoming);
    if (address === undefined) return false;
    const requestId = requestIdFrom(incoming.headers[REQUEST_ID_HEADER]);
    watchRequest(incoming, outgoing, 'edge', log, route, requestId);
    runWithContext({ requestId }, () => serve(incoming, outgoing, requestId, address, input)).catch((error: unknown) => {
      const res = expressResponse(incoming, outgoing, requestId);
      options.answerError(error, res.req, res);
    });
    return true;
  };
}
