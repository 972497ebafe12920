import type { IncomingMessage, ServerResponse } from 'node:http';
import { admitRequest, corsHeaders, followRequest, type HttpContractOptions, type Logger, runWithContext } from '@agentroom/kit';
import { REST_BINDINGS } from '@agentroom/api';
import type { Express, Request, Response } from 'express';
import type { Core } from '../operations/core.js';
import type { Surface } from '../operations/surface.js';
import { restHandler } from './routes.js';

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
    // What express's own `app.handle` does first, so `req.ip`, `req.query` and `res.send` are express's.
    // The properties go on before the prototypes change: V8 adds them faster to the objects as they are.
    const incomingWithRes = incoming as IncomingMessage & { res?: ServerResponse };
    const outgoingWithReq = outgoing as ServerResponse & { req: IncomingMessage; locals?: Response['locals'] };
    incomingWithRes.res = outgoing;
    outgoingWithReq.req = incoming;
    outgoingWithReq.locals = Object.create(null) as Response['locals'];
    const req = Object.setPrototypeOf(incoming, app.request) as Request;
    const res = Object.setPrototypeOf(outgoing, app.response) as Response;
    const requestId = followRequest(req, res, 'edge', log, route);
    runWithContext({ requestId }, () => serve(req, res)).catch((error: unknown) => options.answerError(error, req, res));
    return true;
  };
}
