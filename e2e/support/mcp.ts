import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
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
