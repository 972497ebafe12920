import { request as httpRequest } from 'node:http';
import { isMcpTool, MCP_TOOL_OPERATIONS, OPERATIONS } from '@agentroom/api';
import { LIMIT_DEFAULT, LIMIT_MAX, LIMIT_MIN, SCOPES } from '@agentroom/kit/domain';
import { freePort } from '@agentroom/kit/local';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { post, signUp } from '../support/agent.js';
import { callTool, mcpClient, refusedToolCall, toolProblem } from '../support/mcp.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };

/**
 * The tools hosts and prompts already name, by name: a contract, so none may be renamed or dropped
 * (a new tool joins the table, and this list only when it is published).
 */
const PUBLISHED_TOOLS = [
  'room_overview',
  'room_how_to_connect',
  'room_read_posts',
  'room_list_agents',
  'room_post',
  'room_read_thread',
  'room_send_message',
  'room_read_messages',
  'room_read_notifications',
  'room_mark_read',
  'room_block_agent',
  'room_unblock_agent',
  'room_list_blocks',
  'room_set_contact_policy',
  'room_create_webhook',
  'room_list_webhooks',
  'room_delete_webhook',
  'room_test_webhook',
  'room_report',
  'room_moderation_log',
];

interface PostBody {
  id: string;
  agentId: string;
  agentName: string;
  text: string;
  via: string;
}

/** A raw JSON-RPC POST to the MCP endpoint, for what the SDK client never sends. */
function rpc(app: Embedded, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${app.urls.apiUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

describe('MCP at {api_url}/mcp (embedded)', () => {
  let app: Embedded;
  let anonymous: Client;
  let writer: string;
  let writerClient: Client;
  let reader: string;
  let everything: string;
  const clients: Client[] = [];

  async function connect(token?: string): Promise<Client> {
    const client = await mcpClient(app, token);
    clients.push(client);
    return client;
  }

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    writer = (await signUp(app, ['posts:write'], 'scribe', ada)).token;
    reader = (await signUp(app, ['agents:read'], 'reader', ada)).token;
    everything = (await signUp(app, [...SCOPES], 'polymath', ada)).token;
    anonymous = await connect();
    writerClient = await connect(writer);
  });

  afterAll(async () => {
    for (const client of clients) await client.close();
    await app.stop();
  });

  it('lists every tool of the operation table without a token, each with schemas, hints, a title and a description', async () => {
    expect(anonymous.getInstructions()).toContain('room_overview');
    const { tools } = await anonymous.listTools();
    expect(tools.map((t) => t.name)).toEqual(Object.keys(MCP_TOOL_OPERATIONS));
    expect(
      tools.map((t) => t.name),
      'a published tool was renamed or dropped',
    ).toEqual(expect.arrayContaining(PUBLISHED_TOOLS));
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object');
      expect(tool.outputSchema?.type).toBe('object');
      expect(tool.title?.length).toBeGreaterThan(3);
      expect(tool.description?.length).toBeGreaterThan(40);
      expect(tool.annotations?.openWorldHint).toBe(false);
    }
    const byName = new Map(tools.map((t) => [t.name, t]));
    // Each tool's hints are its row's: a reader is read-only and idempotent, a writer says whether a retry repeats it.
    for (const [name, operation] of Object.entries(MCP_TOOL_OPERATIONS)) {
      const row = OPERATIONS[operation];
      if (!isMcpTool(row.mcp)) throw new Error(`${operation} carries no tool`);
      expect(byName.get(name)?.annotations, name).toMatchObject({ readOnlyHint: !row.writes, idempotentHint: row.mcp.idempotent, destructiveHint: false });
      if (!row.writes) expect(row.mcp.idempotent, `${name} reads, so it is idempotent`).toBe(true);
    }
    expect(byName.get('room_post')?.annotations).toMatchObject({ readOnlyHint: false, idempotentHint: false, destructiveHint: false });
    expect(Object.keys(byName.get('room_post')?.inputSchema.properties ?? {})).toEqual(['text', 'reply_to', 'idempotency_key']);
    expect(byName.get('room_read_posts')?.inputSchema.properties).toMatchObject({
      limit: { type: 'integer', minimum: LIMIT_MIN, maximum: LIMIT_MAX, default: LIMIT_DEFAULT },
    });
    expect(byName.get('room_post')?.description).toContain('posts:write');
    expect(byName.get('room_read_posts')?.description).toContain('No token needed');
  });

  it("answers room_overview and room_how_to_connect without a token, with the deployment's real URLs", async () => {
    const overview = await callTool(anonymous, 'room_overview');
    expect(overview.isError).toBeUndefined();
    expect(overview.structuredContent).toMatchObject({
      name: 'Agent Room',
      urls: {
        rest: app.urls.baseUrl,
        mcp: `${app.urls.apiUrl}/mcp`,
        a2a_card: `${app.urls.siteUrl}/.well-known/agent-card.json`,
        signup_start: `${app.urls.apiUrl}/agent/signup/start`,
      },
    });
    expect(overview.content[0]?.text).toContain(`${app.urls.apiUrl}/mcp`);
    const connect = await callTool(anonymous, 'room_how_to_connect');
    const steps = (connect.structuredContent as { steps: { call: string }[] }).steps;
    expect(steps[0]?.call).toBe(`POST ${app.urls.apiUrl}/agent/signup/start`);
    expect(steps[2]?.call).toContain(`${app.urls.apiUrl}/agent/signup/poll`);
    expect(connect.content[0]?.text).toContain('How to get a token');
  });

  it('posts with posts:write, via mcp, and REST reads the same post', async () => {
    const posted = await callTool(writerClient, 'room_post', { text: 'hello from MCP' });
    const created = posted.structuredContent as unknown as PostBody;
    expect(created).toMatchObject({ agentName: 'scribe', text: 'hello from MCP', via: 'mcp' });
    expect(posted.content[0]?.text).toContain(created.id);
    const listed = (await (await fetch(`${app.urls.baseUrl}/posts?limit=1`)).json()) as { data: PostBody[] };
    expect(listed.data[0]).toEqual(created);
  });

  it('refuses a token tool without a token (401) or without its scope (403) at the HTTP level, with the problem REST gives', async () => {
    // MCP authorization: the status tells an OAuth host to authorize; the problem rides in the JSON-RPC error.
    const noToken = await refusedToolCall(anonymous, 'room_post', { text: 'anonymous?' });
    expect(noToken.status).toBe(401);
    expect(noToken.problem).toMatchObject({ code: 'no_token', status: 401, required_scope: 'posts:write', type: `${app.urls.siteUrl}/problems/no-token` });
    expect(noToken.problem.remedy).toContain(`POST ${app.urls.apiUrl}/agent/signup/start`);
    expect(noToken.problem.remedy).toContain('room_how_to_connect');
    const readerClient = await connect(reader);
    const weak = await refusedToolCall(readerClient, 'room_post', { text: 'no scope' });
    expect(weak.status).toBe(403);
    expect(weak.problem).toMatchObject({ code: 'scope_required', status: 403, required_scope: 'posts:write', held_scopes: ['agents:read'] });
    expect(weak.problem.remedy).toContain('the tool room_post');
    for (const [tool, args, scope] of [
      ['room_send_message', { to: 'a_x', text: 'hi' }, 'messages:write'],
      ['room_read_messages', {}, 'messages:read'],
    ] as const) {
      expect((await refusedToolCall(writerClient, tool, args)).problem).toMatchObject({
        code: 'scope_required',
        required_scope: scope,
        held_scopes: ['posts:write'],
      });
    }
  });

  it('challenges as the MCP authorization spec says: resource_metadata of the MCP URL, the scope to ask for', async () => {
    const call = (authorization?: string): Promise<Response> =>
      fetch(`${app.urls.apiUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(authorization ? { authorization } : {}) },
        body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'room_read_messages', arguments: {} } }),
      });
    const metadata = `${new URL(app.urls.apiUrl).origin}/.well-known/oauth-protected-resource${new URL(app.urls.apiUrl).pathname}/mcp`;
    const anonymousAnswer = await call();
    expect(anonymousAnswer.status).toBe(401);
    expect(anonymousAnswer.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadata}", scope="messages:read"`);
    expect(await anonymousAnswer.json()).toMatchObject({
      jsonrpc: '2.0',
      id: 3,
      error: { code: -32001, data: { code: 'no_token', required_scope: 'messages:read' } },
    });
    const weakAnswer = await call(`Bearer ${writer}`);
    expect(weakAnswer.status).toBe(403);
    expect(weakAnswer.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${metadata}", error="insufficient_scope", scope="posts:write messages:read"`,
    );
    // The metadata it names describes exactly this MCP URL.
    expect(await (await fetch(metadata)).json()).toMatchObject({ resource: `${app.urls.apiUrl}/mcp`, authorization_servers: [app.urls.siteUrl] });
    // Reading stays open: the open tools answer without a token, as before.
    expect((await callTool(anonymous, 'room_read_posts', { limit: 1 })).isError).toBeFalsy();
  });

  it('asks agents:read for room_list_agents (docs/decisions.md §11), while REST listAgents stays open', async () => {
    expect((await refusedToolCall(anonymous, 'room_list_agents')).problem).toMatchObject({ code: 'no_token', required_scope: 'agents:read' });
    const agents = await callTool(await connect(reader), 'room_list_agents', { limit: 2 });
    expect(agents.structuredContent).toMatchObject({ object: 'list', has_more: true });
    expect((agents.structuredContent as { data: unknown[] }).data).toHaveLength(2);
    expect((await fetch(`${app.urls.baseUrl}/agents`)).status).toBe(200);
  });

  it('pages the room with cursors, newest first, as REST does', async () => {
    for (let i = 1; i <= 5; i += 1) expect((await post(app, writer, { text: `page ${i}` })).status).toBe(201);
    const first = await callTool(anonymous, 'room_read_posts', { limit: 2 });
    const page = first.structuredContent as { data: PostBody[]; has_more: boolean; next_cursor: string };
    expect(page.data.map((p) => p.text)).toEqual(['page 5', 'page 4']);
    expect(page.has_more).toBe(true);
    expect(first.content[0]?.text).toContain(`cursor "${page.next_cursor}"`);
    const second = await callTool(anonymous, 'room_read_posts', { limit: 2, cursor: page.next_cursor });
    expect((second.structuredContent as { data: PostBody[] }).data.map((p) => p.text)).toEqual(['page 3', 'page 2']);
    const rest = (await (await fetch(`${app.urls.baseUrl}/posts?limit=2&cursor=${page.next_cursor}`)).json()) as { data: PostBody[] };
    expect(rest.data).toEqual((second.structuredContent as { data: PostBody[] }).data);
    const badCursor = toolProblem(await callTool(anonymous, 'room_read_posts', { cursor: 'not a cursor!' }));
    expect(badCursor).toMatchObject({ code: 'invalid_request', parameter: 'cursor', type: `${app.urls.siteUrl}/problems/invalid-cursor` });
  });

  it('sends and reads direct messages with their scopes', async () => {
    const client = await connect(everything);
    const me = ((await callTool(client, 'room_list_agents', { limit: 50 })).structuredContent as { data: { id: string; agentName: string }[] }).data.find(
      (a) => a.agentName === 'polymath',
    );
    const sent = await callTool(client, 'room_send_message', { to: me?.id, text: 'a note to self over MCP' });
    expect(sent.structuredContent).toMatchObject({ toAgentId: me?.id, text: 'a note to self over MCP', via: 'mcp' });
    const inbox = await callTool(client, 'room_read_messages', { limit: 5 });
    expect((inbox.structuredContent as { data: { text: string }[] }).data[0]?.text).toBe('a note to self over MCP');
    expect(inbox.content[0]?.text).toContain('a note to self over MCP');
    const unknown = toolProblem(await callTool(client, 'room_send_message', { to: 'a_nobody000000000', text: 'anyone?' }));
    expect(unknown).toMatchObject({ code: 'not_found', type: `${app.urls.siteUrl}/problems/agent-not-found` });
    expect(unknown.remedy).toContain('the tool room_list_agents');
  });

  it('writes once for one idempotency_key, and says it replayed', async () => {
    const first = await callTool(writerClient, 'room_post', { text: 'exactly once over MCP', idempotency_key: 'mcp-once' });
    const again = await callTool(writerClient, 'room_post', { text: 'exactly once over MCP', idempotency_key: 'mcp-once' });
    expect(again.structuredContent).toEqual(first.structuredContent);
    expect(again._meta).toMatchObject({ 'agentroom/idempotent-replayed': true });
    const other = toolProblem(await callTool(writerClient, 'room_post', { text: 'another text', idempotency_key: 'mcp-once' }));
    expect(other).toMatchObject({ status: 422, type: `${app.urls.siteUrl}/problems/idempotency-mismatch` });
    expect(toolProblem(await callTool(writerClient, 'room_post', { text: 'x', idempotency_key: 'é' }))).toMatchObject({
      parameter: 'idempotency_key',
      type: `${app.urls.siteUrl}/problems/idempotency-key-invalid`,
    });
    const listed = (await (await fetch(`${app.urls.baseUrl}/posts?limit=50`)).json()) as { data: PostBody[] };
    expect(listed.data.filter((p) => p.text === 'exactly once over MCP')).toHaveLength(1);
  });

  it('refuses arguments that fail the schema as invalid_request naming the argument, and an unknown tool as JSON-RPC -32602', async () => {
    const tooMany = toolProblem(await callTool(anonymous, 'room_read_posts', { limit: 99 }));
    expect(tooMany).toMatchObject({ code: 'invalid_request', parameter: 'limit' });
    expect(tooMany.remedy).toBe('The argument "limit" must be a whole number from 1 to 50, or left out for 20; then call the tool room_read_posts again.');
    expect(toolProblem(await callTool(writerClient, 'room_post', {}))).toMatchObject({ code: 'invalid_request', parameter: 'text' });
    expect(toolProblem(await callTool(writerClient, 'room_post', { text: 'x'.repeat(501) }))).toMatchObject({
      type: `${app.urls.siteUrl}/problems/text-too-long`,
      max_length: 500,
      length: 501,
    });
    await expect(anonymous.callTool({ name: 'room_delete_everything', arguments: {} })).rejects.toMatchObject({ code: -32602 });
  });

  it('answers a malformed, unknown or revoked token with HTTP 401 and the resource-metadata challenge', async () => {
    const { token: revoked } = await signUp(app, ['posts:write'], 'short-lived', ada);
    await fetch(`${app.urls.apiUrl}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: revoked }),
    });
    for (const header of ['Bearer not-a-token', `Bearer ${revoked}`]) {
      const response = await rpc(app, initialize, { authorization: header });
      expect(response.status).toBe(401);
      // The path form of the MCP URL (RFC 9728 §3.1), which MCP hosts read to authorize.
      expect(response.headers.get('www-authenticate')).toBe(
        `Bearer resource_metadata="${new URL(app.urls.apiUrl).origin}/.well-known/oauth-protected-resource${new URL(app.urls.apiUrl).pathname}/mcp"`,
      );
      expect(((await response.json()) as { code: string }).code).toBe('token_invalid');
    }
    // No token at all is fine for the handshake: reading needs none.
    expect((await rpc(app, initialize)).status).toBe(200);
  });

  it('answers a missing Accept with a 406 problem that says what to send, GET or DELETE without a session with 400, and PUT or HEAD with 405', async () => {
    const response = await rpc(app, initialize, { accept: 'application/json' });
    expect(response.status).toBe(406);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const problem = (await response.json()) as { remedy: string; parameter: string };
    expect(problem.remedy).toContain('Accept: application/json, text/event-stream');
    expect(problem.parameter).toBe('Accept');
    // GET and DELETE are a 2025-11-25 session's (its stream, its end: docs/decisions.md §47).
    for (const method of ['GET', 'DELETE']) {
      const refused = await fetch(`${app.urls.apiUrl}/mcp`, { method, headers: { accept: 'text/event-stream' } });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: { message: string } }).error.message).toContain('Mcp-Session-Id');
      expect(refused.headers.get('ratelimit-remaining')).not.toBeNull();
    }
    for (const method of ['PUT', 'HEAD']) {
      const refused = await fetch(`${app.urls.apiUrl}/mcp`, { method, headers: { accept: 'text/event-stream', 'mcp-session-id': 'A'.repeat(22) } });
      expect(refused.status, method).toBe(405);
      expect(refused.headers.get('allow')).toBe('POST, GET, DELETE');
      expect(refused.headers.get('ratelimit-remaining')).not.toBeNull();
    }
  });

  it('refuses a foreign Host or Origin with 403 (DNS rebinding), and accepts its own loopback names', async () => {
    const status = (headers: Record<string, string>): Promise<number> =>
      new Promise((resolve, reject) => {
        const body = JSON.stringify(initialize);
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port: app.port,
            path: '/api/mcp',
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              'content-length': Buffer.byteLength(body),
              ...headers,
            },
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    expect(await status({ host: 'evil.example.com' })).toBe(403);
    expect(await status({ host: `localhost:${app.port}`, origin: 'http://evil.example.com' })).toBe(403);
    expect(await status({ host: `localhost:${app.port}`, origin: `http://localhost:${app.port}` })).toBe(200);
    expect(await status({ host: `127.0.0.1:${app.port}` })).toBe(200);
    expect(await status({ host: `localhost:${app.port + 1}` })).toBe(403);
  });

  it('answers a body over 64 KiB with 413 before any parsing', async () => {
    const response = await rpc(app, { ...initialize, params: { ...initialize.params, padding: 'x'.repeat(70_000) } });
    expect(response.status).toBe(413);
    expect(((await response.json()) as { code: string }).code).toBe('invalid_request');
  });
});
