import { createHash } from 'node:crypto';
import type { PublicUrls } from '@agentroom/kit/config';
import type { ServiceClient } from '@agentroom/kit/grpc';
import { IDEMPOTENCY_HEADER } from '@agentroom/kit/http';
import { DomainError } from '@agentroom/kit/problems';
import { AgentCard as AgentCardJson, A2A_VERSION_HEADER, type AgentCard } from '@a2a-js/sdk';
import { toJsonRpcError } from '@a2a-js/sdk/errors';
import { agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';
import { type NextFunction, type Request, type RequestHandler, type Response, Router } from 'express';
import type { Core } from '../operations/core.js';
import { type Agent, agentId as agentIdSchema, restCall } from '@agentroom/api';
import { toAgent } from '@agentroom/api/wire';
import type { RoomServiceClient } from '@agentroom/proto';
import type { Surface } from '../operations/surface.js';
import type { Problem } from '../operations/problem.js';
import { admissionOf, otherMethods, sendProblem } from '../http/answers.js';
import { agentCard, legacyCardOf, roomCard } from './cards.js';
import { A2ACaller, type A2ATarget, RoomA2AHandler, type RoomProblemError } from './handler.js';

export interface A2AOptions {
  core: Core;
  surface: Surface;
  room: Pick<ServiceClient<RoomServiceClient>, 'call'>;
  version: string;
}

/** How A2A names things: the room's and agents' endpoints and their `SendMessage`; the rest by REST URL. */
export function a2aSurface(urls: PublicUrls): Surface {
  return {
    protocol: 'a2a',
    urls,
    call(operation) {
      if (operation === 'createPost') return `SendMessage to the room at ${urls.apiUrl}/a2a`;
      if (operation === 'sendMessage') return `SendMessage to ${urls.apiUrl}/a2a/<agentId>`;
      if (operation === 'searchPosts') return `SendMessage to the room at ${urls.apiUrl}/a2a with a data part {"skill":"search-posts","q":"…"}`;
      if (operation === 'listReplies') return `SendMessage to the room at ${urls.apiUrl}/a2a with a data part {"skill":"read-thread","postId":"…"}`;
      return restCall(urls, operation) ?? `the card at ${urls.siteUrl}/.well-known/agent-card.json`;
    },
    input(parameter) {
      if (parameter === 'text') return "the message's text parts";
      if (parameter === 'to') return 'the agent id in the endpoint URL';
      return JSON.stringify(parameter);
    },
    // The message id is the key when it is one; a bad key can only have come in the header.
    idempotencyInput: 'Idempotency-Key',
  };
}

/** A request that asks A2A 0.3: the SDK reads a missing `A2A-Version` as 0.3. */
function isLegacy(req: Request): boolean {
  const version = req.header(A2A_VERSION_HEADER);
  return version === undefined || version === '' || version.startsWith('0.');
}

/** The SDK's handlers are routers that answer at their own root: hand them the request as if mounted at this path. */
function atRoot(handler: RequestHandler, req: Request, res: Response, next: NextFunction): void {
  const url = req.url;
  req.url = '/';
  void handler(req, res, (error?: unknown) => {
    req.url = url;
    next(error);
  });
}

/** A card's entity tag, made as the SDK makes the 0.3 card's: the two versions of a card are two representations, with two tags. */
function cardTag(body: string): string {
  return `W/"${createHash('sha256').update(body).digest('hex').slice(0, 16)}"`;
}

/** An HTTP date holds whole seconds: a time as the `Last-Modified` that stands for it. */
function toSecond(time: number): Date {
  return new Date(Math.floor(time / 1000) * 1000);
}

/** An entity tag without its weak mark: If-None-Match compares tags weakly (RFC 9110 §8.8.3.2). */
function opaqueTag(tag: string): string {
  return tag.trim().replace(/^W\//, '');
}

/**
 * Whether the request holds the card the response is about to carry (RFC 9110 §13.2.2): its
 * If-None-Match names the ETag (compared weakly), or else its If-Modified-Since is no older than
 * Last-Modified. Unlike express's `req.fresh`, a request's `Cache-Control: no-cache` does not turn
 * this into a full answer: that directive speaks to caches on the way, and fetch() adds it to every
 * conditional request it sends.
 */
function holdsCard(req: Request, res: Response): boolean {
  const noneMatch = req.headers['if-none-match'];
  if (noneMatch !== undefined) {
    const etag = res.get('ETag');
    return noneMatch.trim() === '*' || (etag !== undefined && noneMatch.split(',').some((tag) => opaqueTag(tag) === opaqueTag(etag)));
  }
  const since = Date.parse(req.headers['if-modified-since'] ?? '');
  const lastModified = Date.parse(res.get('Last-Modified') ?? '');
  return !Number.isNaN(since) && !Number.isNaN(lastModified) && lastModified <= since;
}

/**
 * A card, in the version the caller asked: 1.0 as A2A's JSON, 0.3 through the SDK's translation.
 * (The SDK's own handler writes its 1.0 card unconverted, so that branch is ours.) Either carries
 * an ETag and `lastModified`, and a request that holds the same card already gets 304.
 */
function serveCard(req: Request, res: Response, next: NextFunction, card: AgentCard, lastModified: Date): void {
  res.setHeader('Last-Modified', lastModified.toUTCString());
  if (isLegacy(req)) {
    // 0.3 has no device code flow: that scheme is left out of the 0.3 card rather than sent empty.
    // The SDK's handler sets the ETag and Vary, and answers 304 when `req.fresh`: ours, for this request.
    Object.defineProperty(req, 'fresh', { configurable: true, get: () => holdsCard(req, res) });
    atRoot(
      agentCardHandler({ agentCardProvider: () => Promise.resolve(legacyCardOf(card)), legacyCompat: { enabled: true }, cache: { maxAge: 300 } }),
      req,
      res,
      next,
    );
    return;
  }
  const body = JSON.stringify(AgentCardJson.toJSON(card));
  res.append('Vary', A2A_VERSION_HEADER);
  res.setHeader('ETag', cardTag(body));
  res.setHeader('Cache-Control', 'public, max-age=300');
  if (holdsCard(req, res)) {
    res.status(304).end();
    return;
  }
  res.type('json').send(body);
}

/**
 * A2A (@a2a-js/sdk, A2A 1.0 with 0.3's `message/send` too): the room's card and endpoint, and one
 * card and endpoint per agent. The SDK does the JSON-RPC; every message runs through the pipeline.
 */
export function a2aRoutes(options: A2AOptions): { api: Router; site: Router } {
  const { core, surface, room, version } = options;
  const { urls } = surface;
  const handler = new RoomA2AHandler(core, surface, roomCard(urls, version));
  // The room's cards are made from this process's settings and version: they change when it starts anew.
  const cardsSince = toSecond(Date.now());
  const rpc: RequestHandler = jsonRpcHandler({
    requestHandler: handler,
    legacyCompat: { enabled: true },
    userBuilder: (req) => {
      const caller = (req.res?.locals as { a2aCaller?: A2ACaller } | undefined)?.a2aCaller;
      return caller ? Promise.resolve(caller) : Promise.reject(new Error('an A2A request reached the SDK without its caller'));
    },
  });

  /** A problem as a JSON-RPC error, with an HTTP status of its own (404 for an unknown agent, 401 for a bad token). */
  function sendRpcProblem(req: Request, res: Response, problem: Problem): void {
    const error: RoomProblemError = handler.refusal(problem);
    const body: unknown = req.body;
    const id = typeof body === 'object' && body !== null && 'id' in body && (typeof body.id === 'string' || typeof body.id === 'number') ? body.id : null;
    for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
    const rpcError = isLegacy(req) ? { code: error.envelopeCode, message: error.message, data: problem.document } : toJsonRpcError(error);
    res.status(problem.status).json({ jsonrpc: '2.0', id, error: rpcError });
  }

  /** The agent an endpoint names, or undefined after answering 404 (or 503) the way the caller speaks. */
  async function targetOf(req: Request, res: Response, answer: (problem: Problem) => void): Promise<A2ATarget | undefined> {
    const { agentId } = req.params as { agentId?: string };
    if (agentId === undefined) return { kind: 'room' };
    if (!agentIdSchema.safeParse(agentId).success) {
      answer(core.problem(new DomainError('agent-not-found', { detail: 'No agent has this id.', fields: { parameter: 'to' } }), surface, 'sendMessage'));
      return undefined;
    }
    try {
      const agent: Agent = toAgent((await room.call('getAgent', { agentId })).agent);
      return { kind: 'agent', agent };
    } catch (error) {
      answer(core.problem(error, surface, 'sendMessage'));
      return undefined;
    }
  }

  async function endpoint(req: Request, res: Response, next: NextFunction): Promise<void> {
    const answer = (problem: Problem): void => sendRpcProblem(req, res, problem);
    const target = await targetOf(req, res, answer);
    if (!target) return;
    const admission = admissionOf(res);
    // A bad token is refused at the HTTP level, with the bearer challenge; everything else inside JSON-RPC.
    if (admission.tokenRefusal) return answer(core.problem(admission.tokenRefusal, surface));
    const key = req.headers[IDEMPOTENCY_HEADER];
    res.locals.a2aCaller = new A2ACaller(admission, target, typeof key === 'string' ? key : undefined);
    atRoot(rpc, req, res, next);
  }

  async function card(req: Request, res: Response, next: NextFunction): Promise<void> {
    const target = await targetOf(req, res, (problem) => sendProblem(res, problem));
    if (!target) return;
    if (target.kind === 'room') return serveCard(req, res, next, roomCard(urls, version), cardsSince);
    // An agent's card is what it was named and approved with, so it dates from then, or from this process's start.
    serveCard(req, res, next, agentCard(urls, version, target.agent), toSecond(Math.max(cardsSince.getTime(), Date.parse(target.agent.createdAt))));
  }

  const api = Router();
  // The SDK resolves `.well-known/agent-card.json` against the last path segment: a URL without its trailing slash lands here.
  api.get('/.well-known/agent-card.json', () => {
    throw new DomainError('not-found', {
      detail: `No card here: an agent's card is at ${urls.apiUrl}/a2a/<agentId>/.well-known/agent-card.json, the room's at ${urls.siteUrl}/.well-known/agent-card.json. A2A clients resolve the card against the URL's last segment, so give them the endpoint with a trailing slash (${urls.apiUrl}/a2a/<agentId>/).`,
    });
  });
  // Any other method: 405 with `Allow: POST` (OPTIONS: 204 with it), as the MCP endpoint answers.
  const postOnly = otherMethods(core, surface, ['POST'], (method) => `${method} is not served here: an A2A endpoint takes JSON-RPC requests by POST.`);
  api.post('/', endpoint);
  api.all('/', postOnly);
  const cardOnly = otherMethods(core, surface, ['GET', 'HEAD']);
  api.get('/:agentId/.well-known/agent-card.json', card);
  api.all('/:agentId/.well-known/agent-card.json', cardOnly);
  api.post('/:agentId', endpoint);
  api.all('/:agentId', postOnly);

  const site = Router();
  site.get('/.well-known/agent-card.json', card);
  site.all('/.well-known/agent-card.json', cardOnly);
  return { api, site };
}
