import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport, type VersionNegotiationMode } from '@modelcontextprotocol/client';
import type { Embedded } from '../../launcher/src/embedded.js';
import type { Problem } from './agent.js';

/** What a tool call answers, as the SDK client returns it. */
export interface ToolResult {
  isError?: boolean;
  content: { type: string; text?: string }[];
  structuredContent?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
}

/**
 * An agent on the MCP SDK's own client over Streamable HTTP, with its bearer token if it has one.
 * It lists the tools at once, so the client checks every structuredContent against the tool's
 * output schema from then on.
 */
export async function mcpClient(app: Embedded, token?: string): Promise<Client> {
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(
    new URL(`${app.urls.apiUrl}/mcp`),
    token ? { requestInit: { headers: { authorization: `Bearer ${token}` } } } : undefined,
  );
  await client.connect(transport);
  await client.listTools();
  return client;
}

export async function callTool(client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args })) as ToolResult;
}

/** The problem document a refused tool call carries in its text. */
export function toolProblem(result: ToolResult): Problem {
  if (result.isError !== true) throw new Error(`expected a refused tool call, got ${JSON.stringify(result).slice(0, 300)}`);
  if (result.structuredContent !== undefined) throw new Error('a refused tool call must not carry structuredContent');
  const text = result.content[0]?.text ?? '';
  return JSON.parse(text) as Problem;
}

/**
 * A token tool refused at the HTTP level (MCP authorization: 401 without a token, 403 without the
 * scope): the SDK client without an OAuth provider throws, and the JSON-RPC error it read carries
 * the problem document in its `data`.
 */
export async function refusedToolCall(client: Client, name: string, args: Record<string, unknown> = {}): Promise<{ status: number; problem: Problem }> {
  try {
    await client.callTool({ name, arguments: args });
  } catch (error) {
    if (!(error instanceof StreamableHTTPError)) throw error;
    const body = error.message.slice(error.message.indexOf('{'));
    const parsed = JSON.parse(body) as { jsonrpc: string; error: { code: number; message: string; data: Problem } };
    if (parsed.jsonrpc !== '2.0' || parsed.error.code !== -32001) throw new Error(`not a JSON-RPC authorization error: ${body.slice(0, 300)}`);
    return { status: error.code ?? 0, problem: parsed.error.data };
  }
  throw new Error(`expected ${name} to be refused at the HTTP level`);
}

/** The MCP revision the SDK's v2 client speaks when pinned: stateless, a per-request `_meta` envelope, no `initialize`. */
export const MODERN_REVISION = '2026-07-28';

/**
 * An agent on the SDK's v2 client (`@modelcontextprotocol/client`), speaking 2026-07-28: pinned to
 * it by default (its `server/discover` must offer it), or `auto` (probes, falls back to 2025 only
 * on legacy evidence). It lists the tools at once, as mcpClient does.
 */
export async function mcpModernClient(app: Embedded, token?: string, mode: VersionNegotiationMode = { pin: MODERN_REVISION }): Promise<ModernClient> {
  const client = new ModernClient({ name: 'test-agent-v2', version: '2.0.0' }, { versionNegotiation: { mode } });
  const transport = new ModernTransport(
    new URL(`${app.urls.apiUrl}/mcp`),
    token ? { requestInit: { headers: { authorization: `Bearer ${token}` } } } : undefined,
  );
  await client.connect(transport);
  await client.listTools();
  return client;
}

export async function callModernTool(client: ModernClient, name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args })) as ToolResult;
}

/** The per-request envelope of 2026-07-28, as a raw request carries it in `params._meta`. */
export function modernMeta(extra: Record<string, unknown> = {}, version: string = MODERN_REVISION): Record<string, unknown> {
  return {
    'io.modelcontextprotocol/protocolVersion': version,
    'io.modelcontextprotocol/clientInfo': { name: 'raw-modern', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
    ...extra,
  };
}

/**
 * A raw 2026-07-28 request to `{api_url}/mcp`, for what the SDK's client hides: the body carries the
 * envelope, and the headers mirror it (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) unless
 * `headers` overrides them (a value of `undefined` leaves a header out).
 */
export function modernRpc(
  app: Embedded,
  message: { id?: number | string; method: string; params?: Record<string, unknown>; version?: string; meta?: Record<string, unknown> },
  headers: Record<string, string | undefined> = {},
): Promise<Response> {
  const version = message.version ?? MODERN_REVISION;
  const params: Record<string, unknown> = { ...message.params, _meta: modernMeta(message.meta, version) };
  const name = typeof params.name === 'string' ? params.name : typeof params.uri === 'string' ? params.uri : undefined;
  const all: Record<string, string | undefined> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': version,
    'mcp-method': message.method,
    ...(name === undefined ? {} : { 'mcp-name': name }),
    ...headers,
  };
  const sent = Object.fromEntries(Object.entries(all).filter((entry): entry is [string, string] => entry[1] !== undefined));
  return fetch(`${app.urls.apiUrl}/mcp`, {
    method: 'POST',
    headers: sent,
    body: JSON.stringify({ jsonrpc: '2.0', id: message.id ?? 1, method: message.method, params }),
  });
}
