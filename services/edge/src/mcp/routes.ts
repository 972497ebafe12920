import type { IncomingMessage } from 'node:http';
import type { Logger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import { type AuthInfo, classifyInboundRequest, createMcpHandler, ProtocolErrorCode, UnsupportedProtocolVersionError } from '@modelcontextprotocol/server';
import { NodeStreamableHTTPServerTransport, toNodeHandler } from '@modelcontextprotocol/node';
import { scopeFor } from '@agentroom/api';
import type { Scope } from '@agentroom/kit/domain';
import type { Operation } from '../operations/operation.js';
import type { OperationName } from '../operations/table.js';
import { type Request, type Response, Router } from 'express';
import type { Core } from '../operations/core.js';
import type { Surface } from '../operations/surface.js';
import { admissionOf, asksNoCache, otherMethods, sendProblem } from '../http/answers.js';
import type { PipelineRoute, RequestPipeline } from '../http/pipeline.js';
import type { HostPolicy } from './hosts.js';
import { mcpFastCalls } from './fast.js';
import { type McpChanges, subscribedUri } from './changes.js';
import { legacyResourceNotFound, resourceScope } from './resources.js';
import { authInfoFor, mcpServerFactory } from './server.js';
import { MODERN_REVISIONS, SERVED_REVISIONS } from './revisions.js';
import { isSessionId, type LegacySessions, newSessionId, SessionRefusal } from './sessions.js';
import { TOOLS_BY_NAME } from './tools.js';

export interface McpOptions {
  core: Core;
  surface: Surface;
  hosts: HostPolicy;
  version: string;
  log: Logger;
  /** Change notifications: the bus of `subscriptions/listen`, and the 2025 sessions that subscribe (docs/decisions.md §47). */
  changes: McpChanges;
  sessions: LegacySessions;
}

/** Where MCP is served: edge's request pipeline, and the path of `{api_url}/mcp` in it. */
export interface McpPipelineOptions {
  pipeline: RequestPipeline;
  path: string;
}

/** `{api_url}/mcp`: its POST as a route of edge's request pipeline, and the express router of what that route does not take. */
export interface McpEndpoint {
  route: PipelineRoute;
  /** Mounted at the path: every other method (405), and a POST at a path the route does not match as written (`/mcp//`). */
  router: Router;
}

/** The fetch API's Response (express's is the other one here). */
type WebResponse = globalThis.Response;

/** The JSON-RPC error code of a token tool refused at the HTTP level (server errors are -32000 to -32099). */
const AUTHORIZATION_ERROR = -32001;

/** The JSON-RPC messages of a body, one or a batch. */
function messagesOf(body: unknown): unknown[] {
  return Array.isArray(body) ? body : [body];
}

/** Whether a JSON-RPC body asks tools/call, which answers a spent quota in its own result. */
function isToolCall(body: unknown): boolean {
  return messagesOf(body).some((message) => typeof message === 'object' && message !== null && (message as { method?: unknown }).method === 'tools/call');
}

/** A tools/call of a tool that needs a scope: its JSON-RPC id and the scope. */
interface ScopedCall {
  id: unknown;
  scope: Scope;
  operation?: OperationName;
  /** A subscription to an agent's own URI: only that agent's token may take it. */
  agentId?: string;
  uri?: string;
}

/** The scope an agent's notifications and messages are read with, as their live feeds. */
const AGENT_URI_SCOPE: Scope = 'messages:read';

/** The URIs a message subscribes to: 2026-07-28 `subscriptions/listen`'s filter, or 2025-11-25 `resources/subscribe`. */
function subscribedUris(message: unknown): string[] {
  if (typeof message !== 'object' || message === null) return [];
  const { method, params } = message as { method?: unknown; params?: { uri?: unknown; notifications?: { resourceSubscriptions?: unknown } } };
  if (method === 'resources/subscribe') return typeof params?.uri === 'string' ? [params.uri] : [];
  if (method !== 'subscriptions/listen') return [];
  const uris = params?.notifications?.resourceSubscriptions;
  return Array.isArray(uris) ? uris.filter((uri): uri is string => typeof uri === 'string') : [];
}

/** The URIs a 2026-07-28 body's `subscriptions/listen` streams hear. */
function listenedUris(body: unknown): string[] {
  return messagesOf(body).flatMap((message) =>
    typeof message === 'object' && message !== null && (message as { method?: unknown }).method === 'subscriptions/listen' ? subscribedUris(message) : [],
  );
}

function isInitialize(body: unknown): boolean {
  return messagesOf(body).some((message) => typeof message === 'object' && message !== null && (message as { method?: unknown }).method === 'initialize');
}

/** The id of a single JSON-RPC request, to echo on an error; null for anything else. */
function requestIdOf(body: unknown): string | number | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const { id } = body as { id?: unknown };
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/**
 * server/discover names every revision served, as the UnsupportedProtocolVersion error does (the
 * two lists agree): the SDK's discovery names only the per-request ones (docs/decisions.md §45).
 */
async function discoveringEveryRevision(response: WebResponse, body: unknown): Promise<WebResponse> {
  const method = typeof body === 'object' && body !== null ? (body as { method?: unknown }).method : undefined;
  if (method !== 'server/discover' || response.status !== 200 || !(response.headers.get('content-type') ?? '').startsWith('application/json')) return response;
  const answer = (await response.json()) as { result?: { supportedVersions?: unknown } };
  if (answer.result?.supportedVersions !== undefined) answer.result.supportedVersions = [...SERVED_REVISIONS];
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  return globalThis.Response.json(answer, { status: response.status, headers });
}

/** The tools/call requests of a body whose tool needs a scope (MCP's token tools), and the resources/read of a token resource. */
function scopedCalls(body: unknown, operations: Core['operations']): ScopedCall[] {
  const calls: ScopedCall[] = [];
  for (const message of messagesOf(body)) {
    if (typeof message !== 'object' || message === null) continue;
    const { method, params, id } = message as { method?: unknown; params?: { name?: unknown; uri?: unknown }; id?: unknown };
    // A token resource is refused as a token tool is (docs/decisions.md §46).
    const resource = method === 'resources/read' && typeof params?.uri === 'string' ? resourceScope(params.uri, operations) : undefined;
    if (resource !== undefined) calls.push({ id, ...resource });
    if (method !== 'tools/call' || typeof params?.name !== 'string') continue;
    const tool = TOOLS_BY_NAME.get(params.name);
    const scope = tool === undefined ? undefined : scopeFor(operations[tool.operation] as unknown as Operation, 'mcp');
    if (tool !== undefined && scope !== undefined) calls.push({ id, scope, operation: tool.operation });
  }
  for (const message of messagesOf(body)) {
    for (const uri of subscribedUris(message)) {
      const parsed = subscribedUri(uri);
      if (parsed.kind === 'agent') calls.push({ id: (message as { id?: unknown }).id, scope: AGENT_URI_SCOPE, agentId: parsed.agentId, uri });
    }
  }
  return calls;
}

/**
 * `{api_url}/mcp`: MCP over stateless Streamable HTTP. Every POST gets a new server and transport
 * (any edge replica answers any request; a 2025-11-25 session holds only subscriptions, in the store:
 * docs/decisions.md §47) over tool definitions built once from the
 * operation table; each tool call goes through the same pipeline as REST and A2A. The POST is a
 * route of edge's request pipeline, which counted it and reads its body; a single call of a reading
 * tool is answered without the SDK (mcp/fast.ts), with the same bytes.
 */
export function mcpRoutes(options: McpOptions & McpPipelineOptions): McpEndpoint {
  const { core, surface, hosts, pipeline } = options;
  const factory = mcpServerFactory({ core, surface, version: options.version, log: options.log, sessions: options.sessions });
  const { changes, sessions } = options;
  const onerror = (error: Error): void => options.log.error({ err: error }, 'MCP request failed');
  // The 2026-07-28 revision, by the SDK's own entry; 2025-era requests are routed before it (below).
  const handler = createMcpHandler(factory, { legacy: 'reject', onerror, bus: changes.bus });
  changes.onClose(() => void handler.close());
  const modern = toNodeHandler({ fetch: async (request, init) => discoveringEveryRevision(await handler.fetch(request, init), init?.parsedBody) }, { onerror });
  const router = Router();

  /** A request bearing a session that was ended: the transport's own 404 for an unknown session. */
  const sessionGone = (res: Response, body: unknown): void => {
    res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: requestIdOf(body) });
  };

  /**
   * A 2025-era request (no per-request envelope): a fresh instance from the same factory on the
   * stateless Streamable HTTP transport, answering JSON as before (the fast path's bytes).
   */
  const legacy = async (req: IncomingMessage & { auth?: AuthInfo }, res: Response, body: unknown): Promise<void> => {
    // A session only for what needs one: its GET stream and subscriptions (mcp/sessions.ts).
    if (isInitialize(body)) res.setHeader('Mcp-Session-Id', newSessionId());
    const server = factory({ authInfo: req.auth });
    const transport = new NodeStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    // 2025-11-25's code for an unknown resource, which the SDK no longer emits (docs/decisions.md §46).
    const send = transport.send.bind(transport);
    transport.send = (message, sendOptions) => send(legacyResourceNotFound(message), sendOptions);
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  };

  /** A refusal before any JSON-RPC: a problem document, as every HTTP error of the room. */
  function refuse(res: Response, error: DomainError, headers: Record<string, string> = {}): void {
    const problem = core.problem(error, surface);
    sendProblem(res, { ...problem, headers: { ...problem.headers, ...headers } });
  }

  const post = async (req: Request, res: Response): Promise<void> => {
    if (!hosts.allowsHost(req.headers.host) || !hosts.allowsOrigin(req.headers.origin)) {
      return refuse(
        res,
        new DomainError('host-not-allowed', {
          detail: `Host ${JSON.stringify(req.headers.host ?? '')} or Origin ${JSON.stringify(req.headers.origin ?? '')} is not one of this deployment's.`,
        }),
      );
    }
    const admission = admissionOf(res);
    // A bad token is refused at the HTTP level, with the challenge the MCP authorization spec expects.
    if (admission.tokenRefusal) return refuse(res, admission.tokenRefusal);
    const accept = req.headers.accept ?? '';
    if (!accept.includes('application/json') || !accept.includes('text/event-stream')) {
      return refuse(
        res,
        new DomainError('not-acceptable', {
          detail: `Accept is ${JSON.stringify(accept)}; it must list application/json and text/event-stream.`,
          fields: { parameter: 'Accept', expected: 'application/json, text/event-stream' },
        }),
      );
    }
    // MCP authorization: a token tool without a token is an HTTP 401, without its scope a 403 (the
    // step-up), so a host knows to authorize; the problem rides in the JSON-RPC error for anyone else.
    for (const call of scopedCalls(req.body, core.operations)) {
      try {
        const principal = core.authorize(admission, call.scope, { servedWhenStorageFails: true });
        // Another agent's notifications or messages: refused in the JSON-RPC answer, naming whose they are.
        if (call.agentId !== undefined && principal?.agentId !== call.agentId) {
          res.status(200).json({
            jsonrpc: '2.0',
            id: call.id ?? null,
            error: {
              code: ProtocolErrorCode.InvalidParams,
              message: `${call.uri ?? ''} is agent ${call.agentId}'s own: only a token of that agent may subscribe to it (this token speaks for ${principal?.agentId ?? 'nobody'}).`,
            },
          });
          return;
        }
      } catch (error) {
        const problem = core.problem(error, surface, call.operation);
        if (problem.status !== 401 && problem.status !== 403) continue;
        for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
        res.status(problem.status).json({
          jsonrpc: '2.0',
          id: call.id ?? null,
          error: { code: AUTHORIZATION_ERROR, message: `${problem.document.title}: ${problem.document.remedy}`, data: problem.document },
        });
        return;
      }
    }
    // A spent quota: a tool call says so in its result; anything else (initialize, tools/list) is refused here.
    if (!isToolCall(req.body)) {
      try {
        core.authorize(admission);
      } catch (error) {
        return refuse(res, core.problem(error, surface).error);
      }
    }
    const incoming = req as IncomingMessage & { auth?: AuthInfo };
    const header = (name: string): string | undefined => {
      const value = req.headers[name];
      return typeof value === 'string' ? value : undefined;
    };
    const session = header('mcp-session-id');
    incoming.auth = authInfoFor({
      admission,
      readThrough: asksNoCache(req.headers['cache-control']),
      ...(isSessionId(session) ? { session } : {}),
    });
    const era = classifyInboundRequest({
      httpMethod: 'POST',
      body: req.body,
      protocolVersionHeader: header('mcp-protocol-version'),
      mcpMethodHeader: header('mcp-method'),
      mcpNameHeader: header('mcp-name'),
    });
    // A revision we do not serve: the error names every one we do, 2025-era ones included, as the
    // 2026-07-28 versioning page shows it (the SDK's strict handler names only its modern ones).
    if (era.kind === 'modern' && !MODERN_REVISIONS.includes(era.classification.revision ?? '')) {
      const error = new UnsupportedProtocolVersionError({ supported: [...SERVED_REVISIONS], requested: era.classification.revision ?? 'unknown' });
      res.status(400).json({ jsonrpc: '2.0', id: requestIdOf(req.body), error: { code: error.code, message: error.message, data: error.data } });
      return;
    }
    // A session ended by DELETE: 2025-11-25 answers every later request bearing it 404.
    if (era.kind === 'legacy' && isSessionId(session) && (await sessions.ended(session))) return sessionGone(res, req.body);
    try {
      if (era.kind === 'legacy') await legacy(incoming, res, req.body);
      else {
        // A listen stream's URIs are told from the hub and from each agent's feed, held while it is open.
        const listened = listenedUris(req.body);
        const release = listened.length === 0 ? undefined : await changes.retain(listened);
        try {
          await modern(incoming, res, req.body);
        } finally {
          release?.();
        }
      }
    } catch (error) {
      // The live hub or a notification feed could not be opened for a listen stream (503).
      if (error instanceof DomainError && !res.headersSent) return refuse(res, error);
      options.log.error({ err: error }, 'MCP request failed');
      if (!res.headersSent)
        res.status(500).json({ jsonrpc: '2.0', error: { code: ProtocolErrorCode.InternalError, message: 'Internal server error' }, id: null });
    }
  };
  router.post('/', post);

  /** A 2025-11-25 session's request (GET its stream, DELETE it): the session named, or the JSON-RPC error the transport would answer. */
  const sessionOf = (req: Request, res: Response): string | undefined => {
    if (!hosts.allowsHost(req.headers.host) || !hosts.allowsOrigin(req.headers.origin)) {
      refuse(
        res,
        new DomainError('host-not-allowed', {
          detail: `Host ${JSON.stringify(req.headers.host ?? '')} or Origin ${JSON.stringify(req.headers.origin ?? '')} is not one of this deployment's.`,
        }),
      );
      return undefined;
    }
    const admission = admissionOf(res);
    try {
      core.authorize(admission);
    } catch (error) {
      refuse(res, core.problem(error, surface).error);
      return undefined;
    }
    const id = req.headers['mcp-session-id'];
    if (typeof id !== 'string') {
      res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: Mcp-Session-Id header is required' }, id: null });
      return undefined;
    }
    if (!isSessionId(id)) {
      res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
      return undefined;
    }
    return id;
  };
  const sessionRefused = (res: Response, error: unknown): void => {
    if (!(error instanceof SessionRefusal)) throw error;
    res.status(error.status).json({ jsonrpc: '2.0', error: { code: error.status === 404 ? -32001 : -32000, message: error.message }, id: null });
  };

  // The GET stream of a 2025-11-25 session: where that revision tells a subscriber of a change.
  router.get('/', async (req, res, next) => {
    // HEAD would open a stream it never reads: it is one of the other methods.
    if (req.method === 'HEAD') return next();
    const id = sessionOf(req, res);
    if (id === undefined) return;
    const accept = req.headers.accept ?? '';
    if (!accept.includes('text/event-stream')) {
      res.status(406).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Not Acceptable: Client must accept text/event-stream' }, id: null });
      return;
    }
    try {
      await sessions.stream(id, admissionOf(res).caller.principal?.agentId ?? '', req, res);
    } catch (error) {
      sessionRefused(res, error);
    }
  });
  router.delete('/', async (req, res) => {
    const id = sessionOf(req, res);
    if (id === undefined) return;
    await sessions.end(id);
    res.status(200).end();
  });
  router.all(
    '/',
    otherMethods(core, surface, ['POST', 'GET', 'DELETE'], (method) => `${method} is not served here: MCP is POST, and GET or DELETE of a 2025-11-25 session.`),
  );

  const fast = mcpFastCalls({ core, surface, hosts, pipeline, sessionEnded: (id) => (isSessionId(id) ? sessions.ended(id) : undefined) });
  const route: PipelineRoute = {
    path: options.path,
    methods: ['POST'],
    handle: async (exchange) => {
      const unreadable = await pipeline.body(exchange);
      // Answered by the app's error handler, as a body it cannot read anywhere.
      if (unreadable !== undefined) throw unreadable;
      const { body } = exchange.req as typeof exchange.req & { body?: unknown };
      const admission = exchange.admission;
      if (admission === undefined) throw new Error('the MCP route was reached without the admission step');
      if (await fast(exchange, body, admission)) return;
      const { req, res } = pipeline.toExpress(exchange);
      await post(req, res);
    },
  };
  return { route, router };
}
