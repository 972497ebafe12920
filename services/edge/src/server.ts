import type { PublicUrls } from '@agentroom/kit/config';
import type { ServiceClient } from '@agentroom/kit/grpc';
import { createHttpApp, type ProblemAnswer } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import type { DomainError } from '@agentroom/kit/problems';
import { REST_BINDINGS } from '@agentroom/api';
import type { AuthServiceClient, RoomServiceClient } from '@agentroom/proto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import { a2aRoutes, a2aSurface } from './a2a/routes.js';
import { liveRoutes, type LiveDeps } from './live/routes.js';
import { HostPolicy } from './mcp/hosts.js';
import { mcpRoutes } from './mcp/routes.js';
import { mcpSurface } from './mcp/tools.js';
import { oauthRoutes } from './oauth/routes.js';
import type { Admission, Core, Credentials } from './operations/core.js';
import type { Surface } from './operations/surface.js';
import { renderProblem } from './operations/problem.js';
import { leanReads, leanWrites } from './rest/lean.js';
import { admissionOf, expressObjects, otherMethods } from './http/answers.js';
import { restHandler, restRoutes } from './rest/routes.js';
import { restSurface } from './rest/surface.js';
import { roomPage } from './web/room-page.js';

export interface EdgeAppOptions {
  urls: PublicUrls;
  log: Logger;
  /** The operation pipeline every protocol calls. */
  core: Core;
  room: ServiceClient<RoomServiceClient>;
  auth: ServiceClient<AuthServiceClient>;
  trustProxy: string;
  version: string;
  /** Browser origins besides our own that may call MCP (`*` for any). */
  mcpAllowedOrigins: readonly string[];
  /** The live feeds: the posts hub, the open streams, and how to watch an inbox. */
  live: Pick<LiveDeps, 'hub' | 'live'> & Partial<Pick<LiveDeps, 'watchInbox' | 'watchNotifications'>>;
}

/**
 * Errors outside the operations (bodies that cannot be read, pages, live feeds, unknown paths) read
 * as REST problems; a remedy that asks for the request again names the method and URL it went to.
 */
function restAnswer(surface: Surface): (error: DomainError, req: Request) => ProblemAnswer {
  const site = new URL(surface.urls.siteUrl);
  const api = new URL(surface.urls.apiUrl);
  return (error, req) => {
    const origin = req.headers.host === api.host ? api.origin : site.origin;
    const problem = renderProblem(error, surface, undefined, `${req.method} ${origin}${req.path}`);
    return { remedy: problem.document.remedy, headers: problem.headers };
  };
}

/**
 * Past the protocol adapters, which refuse per operation, whatever is left (pages, live feeds, the
 * 404 problem) is refused here for a bad token or a spent quota, RateLimit headers included.
 */
function admissionGuard(core: Core): RequestHandler {
  return (_req, res, next) => {
    try {
      core.authorize(admissionOf(res));
      next();
    } catch (error) {
      next(error);
    }
  };
}

/** How many (peer, X-Forwarded-For) pairs `clientAddresses` remembers before it starts over. */
const CLIENT_ADDRESSES_KEPT = 1024;

/**
 * `req.ip` (express's `trust proxy` walk over X-Forwarded-For, which parses every address each
 * time), remembered by what it depends on: the peer's address and the X-Forwarded-For header. The
 * same clients call again and again, through the same router connections.
 */
function clientAddresses(): ((req: Request) => string) & { known(req: IncomingMessage): string | undefined } {
  const known = new Map<string, string>();
  const keyOf = (req: IncomingMessage): string => `${req.socket.remoteAddress ?? ''}\n${req.headers['x-forwarded-for'] ?? ''}`;
  const addressOf = (req: Request): string => {
    const key = keyOf(req);
    let address = known.get(key);
    if (address === undefined) {
      address = req.ip ?? 'unknown';
      if (known.size >= CLIENT_ADDRESSES_KEPT) known.clear();
      known.set(key, address);
    }
    return address;
  };
  // Without express's request (edge's fast reads): only an address already worked out.
  return Object.assign(addressOf, { known: (req: IncomingMessage) => known.get(keyOf(req)) });
}

/** Whether `path` is `prefix` or below it. */
function under(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(`${prefix.replace(/\/$/, '')}/`);
}

/**
 * The public API, which a browser on any origin may call (`Access-Control-Allow-Origin: *`, no
 * credentials): REST under {base_url}, signup start and poll, feedback, OAuth, MCP, A2A and the
 * room's card. Edge's human page (the room) and assets stay same-origin, as do auth's pages, which
 * never reach edge (docs/decisions.md §1).
 */
function publicApi(urls: PublicUrls): (req: Request) => boolean {
  const pathOf = (url: string): string => new URL(url).pathname.replace(/\/$/, '');
  const api = pathOf(urls.apiUrl);
  const prefixes = [pathOf(urls.baseUrl), ...['/agent/signup/start', '/agent/signup/poll', '/agent/feedback', '/oauth', '/mcp', '/a2a'].map((path) => `${api}${path}`)];
  const card = `${pathOf(urls.siteUrl)}/.well-known/agent-card.json`;
  return (req) => req.path === card || req.path === api || prefixes.some((prefix) => under(req.path, prefix));
}

/**
 * Edge's request handler: its express app, the HTTP contract (request ids, one admission per
 * request, body limits) around the protocol adapters (REST, OAuth, MCP, A2A) over one pipeline,
 * then the live feeds and the room page; `GET {base_url}/posts` and `POST {base_url}/posts` take
 * the lean paths (rest/lean.ts) to the same REST handling.
 */
export function createEdgeApp(options: EdgeAppOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const { urls, core } = options;
  const rest = restSurface(urls);
  const clientAddress = clientAddresses();
  const credentials = (req: Request): Credentials => ({ authorization: req.headers.authorization, address: clientAddress(req), path: (req.url ?? '').split('?')[0] });
  // Authenticate once and count once per request; the pipeline refuses per operation, in each protocol's words.
  const admit = async (req: Request, res: Response): Promise<{ subject: string; quota: Admission['quota'] }> => {
    const admission = await core.admit(credentials(req));
    res.locals.admission = admission;
    return { subject: admission.subject, quota: admission.quota };
  };
  const { app, finish, answerError } = createHttpApp({
    service: 'edge',
    siteUrl: urls.siteUrl,
    log: options.log,
    trustProxy: options.trustProxy,
    admit,
    answer: restAnswer(rest),
    cors: publicApi(urls),
  });
  const sitePath = new URL(urls.siteUrl).pathname.replace(/\/$/, '');
  const apiPath = new URL(urls.apiUrl).pathname.replace(/\/$/, '');
  const basePath = new URL(urls.baseUrl).pathname;
  const a2a = a2aRoutes({ core, surface: a2aSurface(urls), room: options.room, version: options.version });

  // The live feeds first: `/posts/stream` is theirs, not a post id of `/posts/:postId`.
  app.use(basePath, liveRoutes({ ...options.live, auth: options.auth, core, guard: admissionGuard(core) }));
  app.use(basePath, restRoutes(core, rest, 'base'));
  app.use(apiPath || '/', restRoutes(core, rest, 'api'));
  // {api_url} itself, the resource the OAuth metadata names, answers what {base_url} does (at a
  // host's root, `/` is the room's page).
  if (apiPath !== '') {
    const index = REST_BINDINGS.find((binding) => binding.operation === 'apiIndex');
    if (index !== undefined) app.get(apiPath, restHandler(core, rest, index)).all(apiPath, otherMethods(core, rest, ['GET', 'HEAD']));
  }
  app.use(`${apiPath}/oauth`, oauthRoutes(core, rest));
  const mcp = mcpRoutes({
    core,
    surface: mcpSurface(urls),
    hosts: new HostPolicy(urls, options.mcpAllowedOrigins),
    version: options.version,
    log: options.log,
    path: `${apiPath}/mcp`,
    knownAddress: clientAddress.known,
    asExpress: (req, res) => expressObjects(app, req, res),
    answerError,
  });
  app.use(`${apiPath}/mcp`, mcp.router);
  app.use(`${apiPath}/a2a`, a2a.api);
  app.use(sitePath || '/', a2a.site);

  app.use(admissionGuard(core));
  const { hub } = options.live;
  app.use(sitePath || '/', roomPage({ room: options.room, auth: options.auth, urls, onCreated: (entry) => hub.created(entry) }));
  finish();
  const leanOptions = { app, core, surface: rest, basePath, log: options.log, admit, knownAddress: clientAddress.known, answerError };
  const leanRead = leanReads(leanOptions);
  const leanWrite = leanWrites({ ...leanOptions, credentials });
  return (req, res) => {
    if (!leanRead(req, res) && !leanWrite(req, res) && !mcp.fast(req, res)) app(req, res);
  };
}
