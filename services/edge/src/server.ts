import type { PublicUrls } from '@agentroom/kit/config';
import type { ServiceClient } from '@agentroom/kit/grpc';
import { createHttpApp, type ProblemAnswer } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import type { DomainError } from '@agentroom/kit/problems';
import type { AuthServiceClient, RoomServiceClient } from '@agentroom/proto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler } from 'express';
import { a2aRoutes, a2aSurface } from './a2a/routes.js';
import { liveRoutes, type LiveDeps } from './live/routes.js';
import { HostPolicy } from './mcp/hosts.js';
import type { McpChanges } from './mcp/changes.js';
import { mcpRoutes } from './mcp/routes.js';
import type { LegacySessions } from './mcp/sessions.js';
import { mcpSurface } from './mcp/tools.js';
import { oauthRoutes } from './oauth/routes.js';
import type { Core } from './operations/core.js';
import type { Surface } from './operations/surface.js';
import { renderProblem } from './operations/problem.js';
import { admissionOf } from './http/answers.js';
import { type Exchange, RequestPipeline } from './http/pipeline.js';
import { restRoutes } from './rest/routes.js';
import { restSurface } from './rest/surface.js';
import { moderationLogPage } from './web/moderation-log-page.js';
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
  /** MCP's change notifications, fed from the same hub and feeds (docs/decisions.md §47). */
  mcpChanges: { changes: McpChanges; sessions: LegacySessions };
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

/**
 * The public API, which a browser on any origin may call (`Access-Control-Allow-Origin: *`, no
 * credentials): REST under {base_url}, signup start and poll, feedback, OAuth, MCP, A2A and the
 * room's card. Edge's human page (the room) and assets stay same-origin, as do auth's pages, which
 * never reach edge (docs/decisions.md §1).
 */
function publicApi(urls: PublicUrls): (path: string) => boolean {
  const pathOf = (url: string): string => new URL(url).pathname.replace(/\/$/, '');
  const api = pathOf(urls.apiUrl);
  const prefixes = [
    pathOf(urls.baseUrl),
    ...['/agent/signup/start', '/agent/signup/poll', '/agent/feedback', '/oauth', '/mcp', '/a2a'].map((path) => `${api}${path}`),
  ];
  const card = `${pathOf(urls.siteUrl)}/.well-known/agent-card.json`;
  // A prefix itself, or any path below it.
  const exact = new Set([card, api, ...prefixes]);
  const below = prefixes.map((prefix) => `${prefix}/`);
  return (path) => exact.has(path) || below.some((prefix) => path.startsWith(prefix));
}

/**
 * Edge's request handler: its one request pipeline (http/pipeline.ts: request ids and log lines,
 * CORS, one admission per request, the preflight, body limits, problems), which serves every REST
 * binding and MCP's POST itself, and hands what no route of it takes (OAuth, MCP's other methods,
 * A2A, the live feeds, the room page, the 404) to its express app, the steps done
 * (docs/decisions.md §28).
 */
export function createEdgeApp(options: EdgeAppOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const { urls, core } = options;
  const rest = restSurface(urls);
  const { app, finish, answerError } = createHttpApp({
    service: 'edge',
    siteUrl: urls.siteUrl,
    log: options.log,
    trustProxy: options.trustProxy,
    answer: restAnswer(rest),
  });
  const isPublic = publicApi(urls);
  const pipeline = new RequestPipeline({ app, core, log: options.log, publicApi: isPublic, answerError });
  const trim = (path: string): string => path.replace(/\/$/, '');
  const sitePath = trim(new URL(urls.siteUrl).pathname);
  const apiPath = trim(new URL(urls.apiUrl).pathname);
  const basePath = trim(new URL(urls.baseUrl).pathname);
  const a2a = a2aRoutes({ core, surface: a2aSurface(urls), room: options.room, version: options.version });
  const live = liveRoutes({ ...options.live, auth: options.auth, core, guard: admissionGuard(core) });
  const mcp = mcpRoutes({
    core,
    surface: mcpSurface(urls),
    hosts: new HostPolicy(urls, options.mcpAllowedOrigins),
    version: options.version,
    log: options.log,
    ...options.mcpChanges,
    pipeline,
    path: `${apiPath}/mcp`,
  });

  // The live feeds first: `/posts/stream` is theirs (in express), not a post id of `/posts/:postId`.
  pipeline.add(
    ...live.paths.map((path) => ({
      path: `${basePath}${path}`,
      methods: ['GET', 'HEAD', 'OPTIONS'],
      handle: async (exchange: Exchange) => pipeline.toApp(exchange),
    })),
  );
  pipeline.add(...restRoutes(core, rest, pipeline, { base: basePath, api: apiPath }), mcp.route);

  app.use(basePath || '/', live.router);
  app.use(`${apiPath}/oauth`, oauthRoutes(core, rest));
  app.use(`${apiPath}/mcp`, mcp.router);
  app.use(`${apiPath}/a2a`, a2a.api);
  app.use(sitePath || '/', a2a.site);

  app.use(admissionGuard(core));
  const { hub } = options.live;
  app.use(sitePath || '/', roomPage({ room: options.room, auth: options.auth, urls, core, surface: rest, onCreated: (entry) => hub.created(entry) }));
  app.use(sitePath || '/', moderationLogPage({ room: options.room, auth: options.auth, urls, core, surface: rest }));
  finish();
  return pipeline.handle;
}
