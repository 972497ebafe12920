// The first page of posts over MCP: a stateless tools/call of room_read_posts (limit 20) POSTed to
// `{api_url}/mcp`, each request on its own (no initialize before it, as any stateless client may).
import { z } from 'zod';
import { type CapturedResponse, capture } from './canned.js';
import { type ServerChild } from './children.js';
import { type LoadTarget } from './target.js';
import { PAGE_SIZE } from './pages.js';

/** The MCP protocol version the bench asks for in initialize; it then sends the one the server answers. */
const MCP_PROTOCOL_VERSION = '2025-06-18';

/** The parts of a JSON-RPC answer the bench looks at. */
const mcpAnswer = z.object({
  result: z
    .object({
      protocolVersion: z.unknown(),
      isError: z.unknown(),
      structuredContent: z.object({ object: z.unknown(), data: z.array(z.object({ id: z.string() })).optional() }).optional(),
    })
    .partial()
    .optional(),
  error: z.unknown().optional(),
});

/**
 * The load target, checked once here to answer the posts REST answered (`restIds`), and during the
 * load on every response (a failed JSON-RPC call is still a 200).
 */
export async function mcpReadPosts(embedded: ServerChild, restIds: string[]): Promise<LoadTarget> {
  if (embedded.apiUrl === undefined) throw new Error('the embedded server did not announce its API_URL');
  const url = `${embedded.apiUrl}/mcp`;
  const rpc = async (body: string, headers: Record<string, string> = {}): Promise<{ response: CapturedResponse; json: z.infer<typeof mcpAnswer> }> => {
    const response = await capture(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body,
    });
    const text = response.body.toString('utf8');
    if (response.status !== 200) throw new Error(`POST ${url} answered ${response.status}: ${text.slice(0, 500)}`);
    const json = mcpAnswer.safeParse(JSON.parse(text));
    if (!json.success) throw new Error(`POST ${url} answered no JSON-RPC answer: ${text.slice(0, 500)}`);
    return { response, json: json.data };
  };

  // Only to learn the protocol version the server speaks; the measured requests do not initialize.
  const init = await rpc(
    JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: MCP_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'agent-room-bench', version: '0.1.0' } },
    }),
  );
  const version = init.json.result?.protocolVersion;
  if (typeof version !== 'string') throw new Error(`POST ${url} initialize answered no protocolVersion: ${JSON.stringify(init.json).slice(0, 500)}`);

  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': version };
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'room_read_posts', arguments: { limit: PAGE_SIZE } } });
  const { response, json } = await rpc(body, { 'mcp-protocol-version': version });
  const result = json.result;
  if (json.error !== undefined || result === undefined || result.isError === true || result.structuredContent?.object !== 'list') {
    throw new Error(`POST ${url} tools/call room_read_posts did not answer a list: ${response.body.toString('utf8').slice(0, 500)}`);
  }
  const ids = (result.structuredContent.data ?? []).map((post) => post.id);
  if (ids.join() !== restIds.join())
    throw new Error(`POST ${url} room_read_posts answered ${ids.length} posts, not the ${restIds.length} the first page of GET /posts answered`);

  return {
    url,
    method: 'POST',
    headers,
    body,
    expectBody: {
      check: (text) => text.includes('"structuredContent":{"object":"list"') && !text.includes('"isError":true') && !text.includes('"error":{'),
      description: 'not a room_read_posts result with structuredContent.object "list"',
    },
  };
}
