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
import { mcpChanges } from './changes.js';
import { legacyResourceNotFound, resourceScope } from './resources.js';
import { authInfoFor, mcpServerFactory } from './server.js';
import { MODERN_REVISIONS, SERVED_REVISIONS } from './revisions.js';
import { TOOLS_BY_NAME } from './tools.js';

export interface McpOptions {
  core: Core;
  surface: Surface;
  hosts: HostPolicy;
  version: string;
  log: Logger;
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
  operation: OperationName;
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
  return calls;
}

/**
 * `{api_url}/mcp`: MCP over stateless Streamable HTTP. Every POST gets a new server and transport
 * (no session: any edge replica answers any request) over tool definitions built once from the
 * operation table; each tool call goes through the same pipeline as REST and A2A. The POST is a
 * route of edge's request pipeline, which counted it and reads its body; a single call of a reading
 * tool is answered without the SDK (mcp/fast.ts), with the same bytes.
 */
export function mcpRoutes(options: McpOptions & McpPipelineOptions): McpEndpoint {
  const { core, surface, hosts, pipeline } = options;
  const factory = mcpServerFactory({ core, surface, version: options.version, log: options.log });
  const changes = mcpChanges();
  const onerror = (error: Error): void => options.log.error({ err: error }, 'MCP request failed');
  // The 2026-07-28 revision, by the SDK's own entry; 2025-era requests are routed before it (below).
  const handler = createMcpHandler(factory, { legacy: 'reject', onerror, ...(changes.bus ? { bus: changes.bus } : {}) });
  const modern = toNodeHandler({ fetch: async (request, init) => discoveringEveryRevision(await handler.fetch(request, init), init?.parsedBody) }, { onerror });
  const router = Router();

  /**
   * A 2025-era request (no per-request envelope): a fresh instance from the same factory on the
   * stateless Streamable HTTP transport, answering JSON as before (the fast path's bytes).
   */
  const legacy = async (req: IncomingMessage & { auth?: AuthInfo }, res: Response, body: unknown): Promise<void> => {
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
        core.authorize(admission, call.scope, { servedWhenStorageFails: true });
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
    incoming.auth = authInfoFor({ admission, readThrough: asksNoCache(req.headers['cache-control']) });
    const header = (name: string): string | undefined => {
      const value = req.headers[name];
      return typeof value === 'string' ? value : undefined;
    };
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
    try {
      if (era.kind === 'legacy') await legacy(incoming, res, req.body);
      else await modern(incoming, res, req.body);
    } catch (error) {
      options.log.error({ err: error }, 'MCP request failed');
      if (!res.headersSent)
        res.status(500).json({ jsonrpc: '2.0', error: { code: ProtocolErrorCode.InternalError, message: 'Internal server error' }, id: null });
    }
  };
  router.post('/', post);

  // Stateless: no server-initiated stream to GET, no session to DELETE.
  router.all(
    '/',
    otherMethods(core, surface, ['POST'], (method) => `${method} is not served here: this MCP endpoint is stateless.`),
  );

  const fast = mcpFastCalls({ core, surface, hosts, pipeline });
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
