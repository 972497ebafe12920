import type { IncomingMessage, ServerResponse } from 'node:http';
import { BODY_LIMIT_BYTES } from '@agentroom/kit/domain';
import {
  corsHeaders,
  parseJsonBytes,
  recordAdmission,
  REQUEST_ID_HEADER,
  requestIdFrom,
  runWithContext,
  watchRequest,
} from '@agentroom/kit/http';
import { scopeFor } from '@agentroom/api';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import type { Request, Response } from 'express';
import { asksNoCache, type FastPathOptions, jsonBytes, leadingHeaders } from '../http/answers.js';
import type { Admission, Core } from '../operations/core.js';
import type { Operation } from '../operations/operation.js';
import type { Problem } from '../operations/problem.js';
import type { HostPolicy } from './hosts.js';
import { TOOLS_BY_NAME } from './tools.js';

/** `path` is the literal path of `{api_url}/mcp`; `surface` MCP's. */
export interface McpFastOptions extends FastPathOptions {
  hosts: HostPolicy;
  /** The MCP route's own handler of a POST (routes.ts), for every request this path does not answer itself. */
  handle(req: Request, res: Response): Promise<void>;
  /** The app's error handler: a body it cannot read, and what fails unexpectedly. */
  answerError(error: unknown, req: Request, res: Response): void;
}

/** A `Content-Type` both the app's body parser and the SDK's transport read as JSON in UTF-8. */
const PLAIN_JSON = /^application\/json(?:;[\t ]*charset=utf-8)?$/i;
/** A `Content-Length` as digits: the app's parser refuses more than BODY_LIMIT_BYTES itself (413). */
const LENGTH = /^\d{1,5}$/;

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
 * The fast path of `POST {api_url}/mcp` for the most frequent MCP request: one stateless
 * `tools/call` of a tool that reads and needs no scope (room_read_posts above all), answered with
 * the same bytes the SDK's transport answers (`{"result":{…},"jsonrpc":"2.0","id":…}`, JSON, 200),
 * after the same contract steps as the app's (request id and log line, CORS, one admission with its
 * RateLimit headers, the app's JSON parsing) and the same pipeline (`Core.invoke`). The
 * SDK's per-request server and transport, and the Web Request and Response the transport converts
 * to and from, cost several times the call itself.
 *
 * It answers only a message it can vouch for: a single JSON-RPC request object with exactly
 * `jsonrpc`, `id` (a string or a whole number), `method: "tools/call"` and `params` of exactly `name`
 * (a tool of the table that writes nothing and needs no scope) and, if any, `arguments` (an
 * object), on a request whose Host and Origin are allowed, whose token (if any) holds, whose
 * `Accept` lists both types and whose `Mcp-Protocol-Version` (if any) is one the SDK supports.
 * Everything else (initialize, tools/list, batches, notifications, other tools, a bad token or
 * header) goes, with its body already read, to the route's own handler, the SDK answering it as
 * before. Answers whether it took the request.
 */
export function mcpFastCalls(options: McpFastOptions): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { core, surface, hosts, log, path } = options;
  const cors = Object.entries(corsHeaders());
  const corsFlat = cors.flat();
  // The route's own label: its router is mounted at {api_url}/mcp and answers '/'.
  const route = (): string => `${path}/`;
  /** Each tool's result for an output it answered before, without the JSON-RPC id: the first page is the same object until it changes. */
  const results = new Map<string, WeakMap<object, Buffer>>();

  /**
   * The body, read whole and parsed as the app's parser does (kit's `parseJsonBytes`, for the plain
   * JSON this path takes): the JSON, or the error the app answers. `Content-Length` was checked
   * within the limit; a client that goes away leaves nothing to answer.
   */
  const readBody = (incoming: IncomingMessage): Promise<{ body: unknown } | { error: unknown }> =>
    new Promise((resolve) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.once('end', () => {
        try {
          resolve({ body: parseJsonBytes(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)) });
        } catch (error) {
          resolve({ error });
        }
      });
    });

  /** The one call of a body this path may answer itself, or undefined. */
  const fastCall = (incoming: IncomingMessage, body: unknown, admission: Admission): FastCall | undefined => {
    const { headers } = incoming;
    if (!hosts.allowsHost(headers.host) || !hosts.allowsOrigin(headers.origin) || admission.tokenRefusal) return undefined;
    const accept = headers.accept ?? '';
    if (!accept.includes('application/json') || !accept.includes('text/event-stream')) return undefined;
    const version = headers['mcp-protocol-version'];
    if (version !== undefined && (typeof version !== 'string' || !SUPPORTED_PROTOCOL_VERSIONS.includes(version))) return undefined;
    if (!isPlainObject(body) || !hasOnlyKeys(body, ['jsonrpc', 'id', 'method', 'params']) || body.jsonrpc !== '2.0' || body.method !== 'tools/call') return undefined;
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
  const errorOf = (problem: Problem): Buffer => Buffer.from(`{"result":{"content":[{"type":"text","text":${JSON.stringify(JSON.stringify(problem.document))}}],"isError":true}`, 'utf8');

  /** Express's response with what the app's earlier steps put on it (request id, CORS, the admission). */
  const asApp = (incoming: IncomingMessage, outgoing: ServerResponse, requestId: string, admission?: Admission): { req: Request; res: Response } => {
    const objects = options.asExpress(incoming, outgoing);
    const { res } = objects;
    if (!res.headersSent) {
      res.setHeader('X-Request-Id', requestId);
      for (const [name, value] of cors) res.setHeader(name, value);
      if (admission !== undefined) {
        res.locals.admission = admission;
        recordAdmission(res, admission);
      }
    }
    return objects;
  };

  const serve = async (incoming: IncomingMessage, outgoing: ServerResponse, requestId: string, address: string): Promise<void> => {
    const { headers } = incoming;
    // Counted first, as the app's admission step does before its body parser.
    const admission = await core.admit({ authorization: headers.authorization, address, path });
    const read = await readBody(incoming);
    if ('error' in read) {
      const { req, res } = asApp(incoming, outgoing, requestId, admission);
      options.answerError(read.error, req, res);
      return;
    }
    const call = fastCall(incoming, read.body, admission);
    if (call === undefined) {
      const { req, res } = asApp(incoming, outgoing, requestId, admission);
      // Where the app's body parser leaves it.
      req.body = read.body;
      await options.handle(req, res);
      return;
    }
    const outcome = await core.invoke(admission, call.name, call.args, { surface, readThrough: asksNoCache(headers['cache-control']) });
    const result = outcome.ok ? resultOf(call, outcome.output) : errorOf(outcome.problem);
    const end = `,"jsonrpc":"2.0","id":${JSON.stringify(call.id)}}`;
    const { quota } = admission;
    // The headers the app's steps set, then those the SDK's transport writes (its names in lower case).
    outgoing.writeHead(200, [
      ...leadingHeaders(requestId, corsFlat, quota),
      'content-type',
      'application/json',
      'content-length',
      String(result.length + Buffer.byteLength(end, 'utf8')),
    ]);
    // Two parts, one write: the socket is corked until the end of this tick.
    outgoing.write(result);
    outgoing.end(end, 'utf8');
  };

  return (incoming, outgoing) => {
    const { headers } = incoming;
    if (incoming.method !== 'POST' || incoming.url !== path) return false;
    const type = headers['content-type'];
    const length = headers['content-length'];
    if (type === undefined || !PLAIN_JSON.test(type) || length === undefined || !LENGTH.test(length) || Number(length) > BODY_LIMIT_BYTES) return false;
    if (headers['transfer-encoding'] !== undefined || headers['content-encoding'] !== undefined) return false;
    const address = options.knownAddress(incoming);
    if (address === undefined) return false;
    const requestId = requestIdFrom(headers[REQUEST_ID_HEADER]);
    watchRequest(incoming, outgoing, 'edge', log, route, requestId);
    runWithContext({ requestId }, () => serve(incoming, outgoing, requestId, address)).catch((error: unknown) => {
      const { req, res } = asApp(incoming, outgoing, requestId);
      options.answerError(error, req, res);
    });
    return true;
  };
}
