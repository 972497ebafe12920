import type { IncomingMessage } from 'node:http';
import { isPlainJson } from '@agentroom/kit/http';
import { scopeFor } from '@agentroom/api';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/server';
import { asksNoCache, jsonBytes } from '../http/answers.js';
import type { Exchange, RequestPipeline } from '../http/pipeline.js';
import type { Admission, Core } from '../operations/core.js';
import type { Operation } from '../operations/operation.js';
import type { Problem } from '../operations/problem.js';
import type { Surface } from '../operations/surface.js';
import type { HostPolicy } from './hosts.js';
import { TOOLS_BY_NAME } from './tools.js';

export interface McpFastOptions {
  core: Core;
  /** MCP's surface, for the remedies of any problem. */
  surface: Surface;
  hosts: HostPolicy;
  /** Edge's request pipeline, whose steps (count, body, headers) ran before and write the answer's head. */
  pipeline: RequestPipeline;
  /** Whether the 2025-11-25 session a request names was ended (undefined: not a session we mint); an ended one is the route's to refuse. */
  sessionEnded?: (id: string) => Promise<boolean> | undefined;
}

/** One tools/call this path answers itself: a reading tool that needs no scope. */
interface FastCall {
  id: string | number;
  tool: string;
  name: Parameters<Core['invoke']>[1];
  text(output: unknown): string;
  args: Record<string, unknown>;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype;
}

/** Every key of `required`, and no key but those and `optional`. */
function hasOnlyKeys(value: Record<string, unknown>, required: readonly string[], optional: readonly string[] = []): boolean {
  return Object.keys(value).every((key) => required.includes(key) || optional.includes(key)) && required.every((key) => Object.hasOwn(value, key));
}

/**
 * An optimisation of the MCP adapter for its most frequent request: one stateless `tools/call` of a
 * tool that reads and needs no scope (room_read_posts above all), answered with the same bytes the
 * SDK's transport answers (`{"result":{…},"jsonrpc":"2.0","id":…}`, JSON, 200) after the same
 * operation pipeline (`Core.invoke`). The SDK's per-request server and transport, and the Web
 * Request and Response the transport converts to and from, cost several times the call itself.
 * Every contract step (request id, CORS, the count, the body) is edge's request pipeline's, done
 * before this is asked; the answer's head is the pipeline's too.
 *
 * It answers only a message it can vouch for: a single JSON-RPC request object with exactly
 * `jsonrpc`, `id` (a string or a whole number), `method: "tools/call"` and `params` of exactly `name`
 * (a tool of the table that writes nothing and needs no scope) and, if any, `arguments` (an
 * object), sent as plain JSON (kit's `isPlainJson`) on a request whose Host and Origin are allowed,
 * whose token (if any) holds, whose `Accept` lists both types and whose `Mcp-Protocol-Version` (if
 * any) is one the SDK supports. Everything else (initialize, tools/list, batches, notifications,
 * other tools, a bad token or header) is the SDK's to answer (routes.ts). Answers whether it
 * answered the request.
 */
export function mcpFastCalls(options: McpFastOptions): (exchange: Exchange, body: unknown, admission: Admission) => Promise<boolean> {
  const { core, surface, hosts, pipeline } = options;
  /** Each tool's result for an output it answered before, without the JSON-RPC id: the first page is the same object until it changes. */
  const results = new Map<string, WeakMap<object, Buffer>>();

  /** The one call of a body this path may answer itself, or undefined. */
  const fastCall = (incoming: IncomingMessage, body: unknown, admission: Admission): FastCall | undefined => {
    const { headers } = incoming;
    if (!isPlainJson(incoming) || !hosts.allowsHost(headers.host) || !hosts.allowsOrigin(headers.origin) || admission.tokenRefusal) return undefined;
    const accept = headers.accept ?? '';
    if (!accept.includes('application/json') || !accept.includes('text/event-stream')) return undefined;
    const version = headers['mcp-protocol-version'];
    if (version !== undefined && (typeof version !== 'string' || !SUPPORTED_PROTOCOL_VERSIONS.includes(version))) return undefined;
    if (!isPlainObject(body) || !hasOnlyKeys(body, ['jsonrpc', 'id', 'method', 'params']) || body.jsonrpc !== '2.0' || body.method !== 'tools/call')
      return undefined;
    const { id, params } = body;
    // The ids the SDK's schema takes: a string, or a whole number within the safe range.
    if (!(typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)))) return undefined;
    if (!isPlainObject(params) || !hasOnlyKeys(params, ['name'], ['arguments']) || typeof params.name !== 'string') return undefined;
    const args = params.arguments ?? {};
    if (!isPlainObject(args) || Object.hasOwn(args, '__proto__')) return undefined;
    const tool = TOOLS_BY_NAME.get(params.name);
    if (tool === undefined) return undefined;
    const operation = core.operations[tool.operation] as unknown as Operation;
    if (operation.writes || scopeFor(operation, 'mcp') !== undefined) return undefined;
    return { id, tool: tool.name, name: tool.operation, text: tool.text, args: { ...args } };
  };

  /** What the SDK answers for a tool result: `{"result":…` up to the id, kept per output object. */
  const resultOf = (call: FastCall, output: unknown): Buffer => {
    let kept = results.get(call.tool);
    if (kept === undefined) results.set(call.tool, (kept = new WeakMap()));
    const cacheable = typeof output === 'object' && output !== null;
    let result = cacheable ? kept.get(output) : undefined;
    if (result === undefined) {
      // The SDK's CallToolResult, in the order its schema writes it: content, then structuredContent.
      const content = `{"result":{"content":[{"type":"text","text":${JSON.stringify(call.text(output))}}],"structuredContent":`;
      result = Buffer.concat([Buffer.from(content, 'utf8'), jsonBytes(output), Buffer.from('}', 'utf8')]);
      if (cacheable) kept.set(output, result);
    }
    return result;
  };

  /** A refused call, as the route's handler words it (routes.ts, toolError): the problem document as text. */
  const errorOf = (problem: Problem): Buffer =>
    Buffer.from(`{"result":{"content":[{"type":"text","text":${JSON.stringify(JSON.stringify(problem.document))}}],"isError":true}`, 'utf8');

  return async (exchange, body, admission) => {
    const { headers } = exchange.req;
    const call = fastCall(exchange.req, body, admission);
    if (call === undefined) return false;
    const session = headers['mcp-session-id'];
    if (typeof session === 'string' && (await options.sessionEnded?.(session)) === true) return false;
    const outcome = await core.invoke(admission, call.name, call.args, { surface, readThrough: asksNoCache(headers['cache-control']) });
    const result = outcome.ok ? resultOf(call, outcome.output) : errorOf(outcome.problem);
    const end = `,"jsonrpc":"2.0","id":${JSON.stringify(call.id)}}`;
    // After the pipeline's headers, those the SDK's transport writes (its names in lower case).
    pipeline.head(exchange, 200, ['content-type', 'application/json', 'content-length', String(result.length + Buffer.byteLength(end, 'utf8'))]);
    const { res } = exchange;
    // Two parts, one write: the socket is corked until the end of this tick.
    res.write(result);
    res.end(end, 'utf8');
    return true;
  };
}
