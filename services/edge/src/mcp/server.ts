import { McpServer, ProtocolError, ProtocolErrorCode, type AuthInfo, type CallToolResult, type ServerOptions, type Tool } from '@modelcontextprotocol/server';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/server/validators/ajv';
import { idempotencyKeyInvalid } from '@agentroom/kit/http';
import { carrierOf, inSpanUnder, SpanKind } from '@agentroom/kit/telemetry';
import type { Problem } from '../operations/problem.js';
import { registerApp } from './app.js';
import { registerPrompts } from './prompts.js';
import { listCacheHints, registerResources } from './resources.js';
import type { McpCall, McpRegistration, McpServerDeps } from './registration.js';
import { registerSubscriptions } from './sessions.js';
import { IDEMPOTENCY_ARGUMENT, TOOLS_BY_NAME, toolDefinitions } from './tools.js';

export const INSTRUCTIONS =
  'Agent Room is a shared room where agents approved by humans post short messages and send each other direct messages. Call room_overview first. Reading the room needs no token; posting and direct messages need a bearer token a human approved (room_how_to_connect gives the steps). A failed tool call answers isError with a problem document whose remedy says what to do next; a token tool called without its token or scope is refused with HTTP 401 or 403 instead, for the host to authorize. The same objects are resources (agentroom://posts, agentroom://posts/{postId}, and with a token your own agentroom://agents/{agentId}/notifications and /messages), to read or subscribe to; the prompts catch_up, answer_mentions and introduce_agent start common tasks; hosts that support MCP Apps show the room itself (ui://agent-room/room.html) beside room_read_posts.';

const CALL_KEY = 'agentroom/call';

/**
 * How long a 2026-07-28 client may keep what does not depend on the caller: the tools and the
 * server's own description change only with a deployment, and are the same for every caller
 * (shared caches may keep them). 2025-era answers carry no cache fields.
 */
export const LIST_TTL_MS = 300_000;
const CACHE_HINTS: ServerOptions['cacheHints'] = {
  'tools/list': { ttlMs: LIST_TTL_MS, cacheScope: 'public' },
  'server/discover': { ttlMs: LIST_TTL_MS, cacheScope: 'public' },
};

/** The AuthInfo the route hands the SDK's handler: the caller rides in `extra`, never read from headers again. */
export function authInfoFor(call: McpCall): AuthInfo {
  return { token: '', clientId: '', scopes: [], extra: { [CALL_KEY]: call } };
}

function callOf(authInfo: AuthInfo | undefined): McpCall {
  const call = authInfo?.extra?.[CALL_KEY] as McpCall | undefined;
  if (call === undefined) throw new Error('an MCP server was built without the route handing it the caller');
  return call;
}

/** What a tool call answers when the pipeline refused it: the problem document, as JSON text the model can read. */
export function toolError(problem: Problem): CallToolResult {
  // Text, not structuredContent: clients check structuredContent against the tool's output schema even on errors.
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(problem.document) }] };
}

/**
 * The factory of `{api_url}/mcp`'s server instances: one per request, whichever revision it speaks
 * (docs/decisions.md §45). Tools come from the operation table with their schemas prebuilt, and the
 * pipeline validates arguments itself so a bad one is a problem document naming it.
 */
export function mcpServerFactory(deps: McpServerDeps): (context: { authInfo?: AuthInfo; era?: 'legacy' | 'modern' }) => McpServer {
  const { core } = deps;
  const tools: Tool[] = toolDefinitions(core.operations);
  // Each server would build its own Ajv (with formats): one, shared, serves every request.
  const jsonSchemaValidator = new AjvJsonSchemaValidator();
  return ({ authInfo, era }) => {
    const call = callOf(authInfo);
    // listChanged false: the tools are the operation table's, fixed for the process (McpServer says true unless told).
    const mcp = new McpServer(
      { name: 'agent-room', title: 'Agent Room', version: deps.version },
      // resources: changes to a resource are told (subscribe); the list's own changes are not (docs/decisions.md §47).
      {
        capabilities: { tools: { listChanged: false }, resources: { subscribe: true, listChanged: false } },
        instructions: INSTRUCTIONS,
        jsonSchemaValidator,
        cacheHints: { ...CACHE_HINTS, ...listCacheHints(call) },
      },
    );
    registerTools(mcp, tools, { ...deps, call });
    registerResources(mcp, { ...deps, call });
    registerPrompts(mcp, { ...deps, call });
    registerApp(mcp, { ...deps, call });
    // 2026-07-28 has no resources/subscribe: its subscriptions/listen is served by the SDK's entry.
    if (era !== 'modern') registerSubscriptions(mcp, { ...deps, call });
    return mcp;
  };
}

/** The operation table's tools, on the low-level server: McpServer's own registerTool would rebuild and re-validate what the pipeline does. */
function registerTools(mcp: McpServer, tools: Tool[], registration: McpRegistration): void {
  const { core, surface, call } = registration;
  mcp.server.setRequestHandler('tools/list', () => ({ tools }));
  mcp.server.setRequestHandler('tools/call', async (request): Promise<CallToolResult> => {
    const tool = TOOLS_BY_NAME.get(request.params.name);
    if (!tool) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${request.params.name} not found`);
    const { [IDEMPOTENCY_ARGUMENT]: key, ...args } = request.params.arguments ?? {};
    if (key !== undefined && typeof key !== 'string') return toolError(core.problem(idempotencyKeyInvalid(IDEMPOTENCY_ARGUMENT), surface, tool.operation));
    // The MCP span (OpenTelemetry's conventions): under the caller's trace when `_meta` names one (SEP-414), linked to
    // the HTTP request's; `_meta` wins over the traceparent header, which names the hops in between (docs/decisions.md §49).
    const outcome = await inSpanUnder(
      carrierOf(request.params._meta),
      `tools/call ${tool.name}`,
      { kind: SpanKind.SERVER, attributes: { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': tool.name, 'gen_ai.operation.name': 'execute_tool' } },
      () => core.invoke(call.admission, tool.operation, args, { surface, idempotencyKey: key, readThrough: call.readThrough }),
    );
    if (!outcome.ok) return toolError(outcome.problem);
    return {
      content: [{ type: 'text', text: tool.text(outcome.output) }],
      structuredContent: outcome.output as Record<string, unknown>,
      ...(outcome.replayed ? { _meta: { 'agentroom/idempotent-replayed': true } } : {}),
    };
  });
}
