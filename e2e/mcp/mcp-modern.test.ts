import { MCP_TOOL_OPERATIONS } from '@agentroom/api';
import { freePort } from '@agentroom/kit/local';
import type { Client as ModernClient } from '@modelcontextprotocol/client';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { signUp } from '../support/agent.js';
import { callModernTool, MODERN_REVISION, mcpClient, mcpModernClient, modernRpc, toolProblem } from '../support/mcp.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };

/** Every revision `{api_url}/mcp` serves, newest first: 2026-07-28 by its own rules, the 2025-era ones through `initialize`. */
const SERVED = [MODERN_REVISION, ...SUPPORTED_PROTOCOL_VERSIONS];

const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';

interface RpcAnswer {
  jsonrpc: '2.0';
  id: number | string | null;
  result?: Record<string, unknown> & { resultType?: string; _meta?: Record<string, unknown> };
  error?: { code: number; message: string; data?: Record<string, unknown> };
}

async function answer(response: Response): Promise<RpcAnswer> {
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  return (await response.json()) as RpcAnswer;
}

interface PostBody {
  id: string;
  text: string;
  via: string;
  agentName: string;
}

describe('MCP 2026-07-28 at {api_url}/mcp, beside 2025-11-25 (embedded)', () => {
  let app: Embedded;
  let writer: string;
  let reader: string;
  const clients: { close(): Promise<void> }[] = [];

  async function modern(token?: string, mode?: Parameters<typeof mcpModernClient>[2]): Promise<ModernClient> {
    const client = await mcpModernClient(app, token, mode);
    clients.push(client);
    return client;
  }

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    writer = (await signUp(app, ['posts:write'], 'modern-scribe', ada)).token;
    reader = (await signUp(app, ['agents:read'], 'modern-reader', ada)).token;
  });

  afterAll(async () => {
    for (const client of clients) await client.close();
    await app.stop();
  });

  it('the v2 client pinned to 2026-07-28 discovers the server and lists the same tools a 2025-11-25 client does', async () => {
    const client = await modern();
    expect(client.getProtocolEra()).toBe('modern');
    expect(client.getNegotiatedProtocolVersion()).toBe(MODERN_REVISION);
    expect(client.getServerVersion()).toMatchObject({ name: 'agent-room', title: 'Agent Room' });
    expect(client.getServerCapabilities()).toMatchObject({ tools: {} });
    expect(client.getInstructions()).toContain('room_overview');
    // Every revision served, as the UnsupportedProtocolVersion error names them: 2025-era ones through initialize.
    expect(client.getDiscoverResult()?.supportedVersions).toEqual(SERVED);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(Object.keys(MCP_TOOL_OPERATIONS));
    const legacy = await mcpClient(app);
    clients.push(legacy);
    expect(tools).toEqual((await legacy.listTools()).tools);
  });

  it('the v2 client in auto mode settles on 2026-07-28, and a 2025 client still gets 2025-11-25', async () => {
    const client = await modern(undefined, 'auto');
    expect(client.getProtocolEra()).toBe('modern');
    expect(client.getNegotiatedProtocolVersion()).toBe(MODERN_REVISION);
    const legacy = await mcpClient(app);
    clients.push(legacy);
    expect((legacy.transport as StreamableHTTPClientTransport).protocolVersion).toBe('2025-11-25');
  });

  it('reads and posts through the v2 client: via mcp, idempotent by key, problems as text', async () => {
    const anonymous = await modern();
    const read = await callModernTool(anonymous, 'room_read_posts', { limit: 1 });
    expect(read.isError).toBeFalsy();
    expect(read.structuredContent).toMatchObject({ object: 'list' });
    const client = await modern(writer);
    const posted = await callModernTool(client, 'room_post', { text: 'hello from 2026-07-28' });
    const created = posted.structuredContent as unknown as PostBody;
    expect(created).toMatchObject({ agentName: 'modern-scribe', text: 'hello from 2026-07-28', via: 'mcp' });
    const listed = (await (await fetch(`${app.urls.baseUrl}/posts?limit=1`)).json()) as { data: PostBody[] };
    expect(listed.data[0]).toEqual(created);

    const first = await callModernTool(client, 'room_post', { text: 'once, modern', idempotency_key: 'modern-once' });
    const again = await callModernTool(client, 'room_post', { text: 'once, modern', idempotency_key: 'modern-once' });
    expect(again.structuredContent).toEqual(first.structuredContent);
    expect(again._meta).toMatchObject({ 'agentroom/idempotent-replayed': true });

    const tooMany = toolProblem(await callModernTool(anonymous, 'room_read_posts', { limit: 99 }));
    expect(tooMany).toMatchObject({ code: 'invalid_request', parameter: 'limit' });
  });

  it('answers server/discover with our versions, capabilities, instructions and identity in _meta', async () => {
    const discovered = await answer(await modernRpc(app, { method: 'server/discover' }));
    expect(discovered.result).toMatchObject({
      resultType: 'complete',
      supportedVersions: SERVED,
      capabilities: { tools: {} },
      cacheScope: 'public',
      _meta: { [SERVER_INFO]: { name: 'agent-room', title: 'Agent Room', version: expect.any(String) } },
    });
    expect(discovered.result?.instructions).toContain('room_overview');
    expect(discovered.result?.ttlMs).toBeGreaterThan(0);
    // The discovery documents name the same revisions.
    const manifest = (await (await fetch(`${app.urls.siteUrl}/.well-known/ai-agent.json`)).json()) as { interfaces: { mcp: { protocol_versions: string[] } } };
    expect(manifest.interfaces.mcp.protocol_versions).toEqual(SERVED);
    expect(await (await fetch(`${app.urls.siteUrl}/llms.txt`)).text()).toContain('revisions 2026-07-28 and 2025-11-25');
    expect(await (await fetch(`${app.urls.siteUrl}/developers`)).text()).toContain('in both protocol revisions: 2026-07-28');
  });

  it('answers tools/list the same for every caller, with resultType, a real ttlMs and a public cacheScope', async () => {
    const anonymous = await modernRpc(app, { method: 'tools/list' });
    expect(anonymous.status).toBe(200);
    const text = await anonymous.text();
    const listed = JSON.parse(text) as RpcAnswer;
    expect(listed.result).toMatchObject({ resultType: 'complete', cacheScope: 'public', _meta: { [SERVER_INFO]: { name: 'agent-room' } } });
    expect(listed.result?.ttlMs).toBeGreaterThanOrEqual(60_000);
    // Deterministic: byte for byte the same answer to another caller, with or without a token.
    expect(await (await modernRpc(app, { method: 'tools/list' }, { authorization: `Bearer ${writer}` })).text()).toBe(text);
    expect(await (await modernRpc(app, { method: 'tools/list' }, { authorization: `Bearer ${reader}` })).text()).toBe(text);
  });

  it('puts resultType and serverInfo on tool results, refused ones included, and accepts traceparent and tracestate', async () => {
    const traced = {
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      tracestate: 'agentroom=t61rcWkgMzE',
    };
    const ok = await answer(await modernRpc(app, { method: 'tools/call', params: { name: 'room_overview', arguments: {} }, meta: traced }));
    expect(ok.result).toMatchObject({ resultType: 'complete', structuredContent: { name: 'Agent Room' }, _meta: { [SERVER_INFO]: { name: 'agent-room' } } });
    const refused = await answer(await modernRpc(app, { method: 'tools/call', params: { name: 'room_read_posts', arguments: { limit: 0 } } }));
    expect(refused.result).toMatchObject({ resultType: 'complete', isError: true });
    expect(refused.result?.structuredContent).toBeUndefined();
    const content = refused.result?.content as { type: string; text: string }[];
    expect(JSON.parse(content[0]?.text ?? '')).toMatchObject({ code: 'invalid_request', parameter: 'limit' });
  });

  it('refuses a revision it does not serve with -32022 naming every revision it serves, 2025-era ones included', async () => {
    for (const version of ['2099-01-01', '1900-01-01']) {
      const response = await modernRpc(app, { id: 7, method: 'tools/list', version });
      expect(response.status, version).toBe(400);
      expect(await answer(response)).toMatchObject({
        id: 7,
        error: { code: -32022, data: { supported: SERVED, requested: version } },
      });
    }
  });

  it('checks Mcp-Method and Mcp-Name against the body: HeaderMismatch (-32020), HTTP 400', async () => {
    const call = { id: 9, method: 'tools/call', params: { name: 'room_overview', arguments: {} } };
    for (const headers of [{ 'mcp-method': 'tools/list' }, { 'mcp-name': 'room_post' }, { 'mcp-name': undefined }, { 'mcp-protocol-version': '2025-11-25' }]) {
      const response = await modernRpc(app, call, headers);
      expect(response.status, JSON.stringify(headers)).toBe(400);
      expect((await answer(response)).error?.code, JSON.stringify(headers)).toBe(-32020);
    }
    // The Base64 form of Mcp-Name is the same name.
    const encoded = `=?base64?${Buffer.from('room_overview').toString('base64')}?=`;
    expect((await modernRpc(app, call, { 'mcp-name': encoded })).status).toBe(200);
  });

  it("keeps edge's own contract on the modern path: Host and Origin, a bad token, 401 and 403 with the challenge", async () => {
    const metadata = `${new URL(app.urls.apiUrl).origin}/.well-known/oauth-protected-resource${new URL(app.urls.apiUrl).pathname}/mcp`;
    const foreign = await modernRpc(app, { method: 'tools/list' }, { origin: 'http://evil.example.com' });
    expect(foreign.status).toBe(403);
    expect(((await foreign.json()) as { type: string }).type).toBe(`${app.urls.siteUrl}/problems/host-not-allowed`);

    const bad = await modernRpc(app, { method: 'tools/list' }, { authorization: 'Bearer not-a-token' });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadata}"`);
    expect(((await bad.json()) as { code: string }).code).toBe('token_invalid');

    const post = { id: 11, method: 'tools/call', params: { name: 'room_post', arguments: { text: 'no token' } } };
    const noToken = await modernRpc(app, post);
    expect(noToken.status).toBe(401);
    expect(noToken.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadata}", scope="posts:write"`);
    expect(await noToken.json()).toMatchObject({ id: 11, error: { code: -32001, data: { code: 'no_token', required_scope: 'posts:write' } } });
    const weak = await modernRpc(app, post, { authorization: `Bearer ${reader}` });
    expect(weak.status).toBe(403);
    expect(weak.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadata}", error="insufficient_scope", scope="agents:read posts:write"`);
    // The v2 client without an OAuth provider gives up on the 401 instead of posting anonymously.
    await expect(callModernTool(await modern(), 'room_post', { text: 'anonymous?' })).rejects.toThrow();
    const listed = (await (await fetch(`${app.urls.baseUrl}/posts?limit=5`)).json()) as { data: PostBody[] };
    expect(listed.data.map((p) => p.text)).not.toContain('anonymous?');
  });
});

describe('MCP 2026-07-28 and the daily quota', () => {
  let app: Embedded;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000', QUOTA_PER_TOKEN: '3' });
  });

  afterAll(() => app.stop());

  it('answers a spent quota as 2025-11-25 does: tools/call in its result, anything else with the 429 problem', async () => {
    const { token } = await signUp(app, ['posts:write'], 'modern-chatty', ada);
    const post = (text: string): Promise<Response> =>
      modernRpc(app, { method: 'tools/call', params: { name: 'room_post', arguments: { text } } }, { authorization: `Bearer ${token}` });
    for (let i = 0; i < 3; i += 1) expect((await answer(await post(`note ${i}`))).result?.isError).toBeUndefined();
    const spent = await answer(await post('one too many'));
    expect(spent.result).toMatchObject({ resultType: 'complete', isError: true });
    const content = spent.result?.content as { text: string }[];
    expect(JSON.parse(content[0]?.text ?? '')).toMatchObject({ code: 'rate_limited', limit: 3 });
    const listed = await modernRpc(app, { method: 'tools/list' }, { authorization: `Bearer ${token}` });
    expect(listed.status).toBe(429);
    expect(((await listed.json()) as { code: string }).code).toBe('rate_limited');
  });
});
