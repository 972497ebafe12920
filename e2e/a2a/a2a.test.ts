import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { a2aClient, partsOf, rpcFailure, send, textMessage } from '../support/a2a.js';
import { signUp } from '../support/agent.js';
import { callTool, mcpClient } from '../support/mcp.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
const alan = { name: 'Alan Turing', password: 'the imitation game' };

interface MessageBody {
  id: string;
  fromAgentId: string;
  fromAgentName: string;
  toAgentId: string;
  text: string;
  via: string;
}

async function agentId(app: Embedded, name: string): Promise<string> {
  const agents = (await (await fetch(`${app.urls.baseUrl}/agents?limit=50`)).json()) as { data: { id: string; agentName: string }[] };
  const id = agents.data.find((a) => a.agentName === name)?.id;
  if (id === undefined) throw new Error(`no agent named ${name}`);
  return id;
}

/** A raw JSON-RPC call, for what the 1.0 client never sends (0.3 methods, no version header). */
async function rpc(
  url: string,
  method: string,
  params: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'req-1', method, params }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('A2A (embedded)', () => {
  let app: Embedded;
  let alice: string;
  let bob: string;
  let bobId: string;
  let aliceId: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    alice = (await signUp(app, ['messages:write', 'posts:write'], 'alice', ada)).token;
    bob = (await signUp(app, ['messages:read', 'agents:read'], 'bob', alan)).token;
    bobId = await agentId(app, 'bob');
    aliceId = await agentId(app, 'alice');
  });

  afterAll(() => app.stop());

  it("serves the room's card at {site_url}/.well-known/agent-card.json: skills, bearer scheme, real URLs", async () => {
    const client = await a2aClient(app.urls.siteUrl);
    const card = await client.getAgentCard();
    expect(card.name).toBe('Agent Room');
    expect(card.skills.map((s) => s.id)).toEqual(['read-room', 'search-posts', 'read-thread', 'post', 'report', 'direct-message']);
    expect(card.supportedInterfaces.map((i) => [i.url, i.protocolBinding, i.protocolVersion])).toEqual([
      [`${app.urls.apiUrl}/a2a`, 'JSONRPC', '1.0'],
      [`${app.urls.apiUrl}/a2a`, 'JSONRPC', '0.3'],
    ]);
    // A2A 1.0's JSON, as read off the wire.
    const raw = (await (await fetch(`${app.urls.siteUrl}/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } })).json()) as Record<
      string,
      unknown
    >;
    expect(raw.securitySchemes).toMatchObject({ bearer: { httpAuthSecurityScheme: { scheme: 'Bearer' } } });
    // A bearer token, or OAuth: the authorization code flow (MCP hosts' way) or the device code flow.
    expect(raw.securityRequirements).toEqual([{ schemes: { bearer: {} } }, { schemes: { oauth2: {} } }, { schemes: { oauth2_device: {} } }]);
    expect(raw.securitySchemes).toMatchObject({
      oauth2: { oauth2SecurityScheme: { flows: { authorizationCode: { authorizationUrl: `${app.urls.siteUrl}/authorize` } } } },
    });
    expect(JSON.stringify(raw)).not.toContain('$case');
    // An 0.3 client (no A2A-Version header) gets the 0.3 shape of the same card.
    const legacy = await fetch(`${app.urls.siteUrl}/.well-known/agent-card.json`);
    expect(legacy.headers.get('vary')).toContain('A2A-Version');
    expect(await legacy.json()).toMatchObject({
      name: 'Agent Room',
      url: `${app.urls.apiUrl}/a2a`,
      protocolVersion: '0.3',
      securitySchemes: { bearer: { type: 'http', scheme: 'Bearer' } },
    });
  });

  it("delivers a message to an agent's endpoint as a direct message via a2a; the recipient reads it over REST and MCP", async () => {
    const client = await a2aClient(`${app.urls.apiUrl}/a2a/${bobId}`);
    expect((await client.getAgentCard()).name).toBe('bob');
    const answer = partsOf(await send(client, textMessage(['hello, bob,', 'from A2A']), alice));
    const stored = answer.data.message as MessageBody;
    expect(stored).toMatchObject({ fromAgentId: aliceId, fromAgentName: 'alice', toAgentId: bobId, text: 'hello, bob,\nfrom A2A', via: 'a2a' });
    expect(answer.text).toContain(stored.id);
    const rest = (await (await fetch(`${app.urls.baseUrl}/messages?limit=1`, { headers: { authorization: `Bearer ${bob}` } })).json()) as {
      data: MessageBody[];
    };
    expect(rest.data[0]).toEqual(stored);
    const mcp = await mcpClient(app, bob);
    const inbox = await callTool(mcp, 'room_read_messages', { limit: 1 });
    await mcp.close();
    expect((inbox.structuredContent as { data: MessageBody[] }).data[0]).toEqual(stored);
  });

  it("posts a message sent to the room's endpoint", async () => {
    const room = await a2aClient(app.urls.siteUrl);
    const answer = partsOf(await send(room, textMessage(['hello, room, from A2A']), alice));
    expect(answer.data.post).toMatchObject({ agentName: 'alice', text: 'hello, room, from A2A', via: 'a2a' });
    const listed = (await (await fetch(`${app.urls.baseUrl}/posts?limit=1`)).json()) as { data: unknown[] };
    expect(listed.data[0]).toEqual(answer.data.post);
  });

  it("takes 0.3's message/send without an A2A-Version header, and serves the 0.3 card", async () => {
    const endpoint = `${app.urls.apiUrl}/a2a/${bobId}`;
    const legacyCard = (await (await fetch(`${endpoint}/.well-known/agent-card.json`)).json()) as Record<string, unknown>;
    expect(legacyCard).toMatchObject({ name: 'bob', url: endpoint, protocolVersion: '0.3', preferredTransport: 'JSONRPC' });
    const message = { kind: 'message', messageId: 'legacy-one', role: 'user', parts: [{ kind: 'text', text: 'from an 0.3 client' }] };
    const { status, body } = await rpc(endpoint, 'message/send', { message }, { authorization: `Bearer ${alice}` });
    expect(status).toBe(200);
    expect(body.result).toMatchObject({
      kind: 'message',
      role: 'agent',
      parts: [{ kind: 'text' }, { kind: 'data', data: { message: { text: 'from an 0.3 client', via: 'a2a' } } }],
    });
    // Without the header, the 1.0 method name is not the one the SDK routes 0.3 requests by.
    const unversioned = await rpc(
      endpoint,
      'SendMessage',
      { message: { messageId: 'x', role: 'ROLE_USER', parts: [{ text: 'x' }] } },
      { authorization: `Bearer ${alice}` },
    );
    expect(unversioned.body.error).toBeDefined();
  });

  it('sends a message once for one messageId: a retry replays the first answer', async () => {
    const client = await a2aClient(`${app.urls.apiUrl}/a2a/${bobId}`);
    const first = partsOf(await send(client, textMessage(['only once'], 'retry-me-1'), alice));
    const again = partsOf(await send(client, textMessage(['only once'], 'retry-me-1'), alice));
    expect(again.data).toEqual(first.data);
    const rest = (await (await fetch(`${app.urls.baseUrl}/messages?limit=50`, { headers: { authorization: `Bearer ${bob}` } })).json()) as {
      data: MessageBody[];
    };
    expect(rest.data.filter((m) => m.text === 'only once')).toHaveLength(1);
  });

  it('answers an unknown agent with a JSON-RPC error and HTTP 404, and its card with a 404 problem', async () => {
    const endpoint = `${app.urls.apiUrl}/a2a/a_nobody0000000000`;
    for (const [method, headers] of [
      ['SendMessage', { 'A2A-Version': '1.0' }],
      ['message/send', {}],
    ] as const) {
      const { status, body } = await rpc(endpoint, method, { message: textMessage(['anyone?']) }, { ...headers, authorization: `Bearer ${alice}` });
      expect(status).toBe(404);
      expect(body).toMatchObject({ jsonrpc: '2.0', id: 'req-1', error: { code: -32044 } });
    }
    const v1 = await rpc(endpoint, 'SendMessage', {}, { 'A2A-Version': '1.0' });
    expect((v1.body.error as { data: { metadata: Record<string, string> }[] }).data[0]?.metadata).toMatchObject({
      code: 'not_found',
      type: `${app.urls.siteUrl}/problems/agent-not-found`,
    });
    const legacy = await rpc(endpoint, 'message/send', {});
    expect((legacy.body.error as { data: Record<string, unknown> }).data).toMatchObject({ code: 'not_found', status: 404 });
    const card = await fetch(`${endpoint}/.well-known/agent-card.json`);
    expect(card.status).toBe(404);
    expect(card.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    // The card URL an SDK resolves when the trailing slash is missing says how to fix it.
    const slashless = await fetch(`${app.urls.apiUrl}/a2a/.well-known/agent-card.json`);
    expect(slashless.status).toBe(404);
    expect(((await slashless.json()) as { detail: string }).detail).toContain('trailing slash');
  });

  it('carries the problem in the JSON-RPC error for no token, a missing scope, no text and too much text', async () => {
    const client = await a2aClient(`${app.urls.apiUrl}/a2a/${aliceId}`);
    const anonymous = await rpcFailure(send(client, textMessage(['who am I?'])));
    expect(anonymous).toMatchObject({ code: -32041, reason: 'NO_TOKEN', problem: { code: 'no_token', status: '401', required_scope: 'messages:write' } });
    expect(anonymous.problem.remedy).toContain(`POST ${app.urls.apiUrl}/agent/signup/start`);
    const weak = await rpcFailure(send(client, textMessage(['read-only bob writes']), bob));
    expect(weak).toMatchObject({
      code: -32043,
      problem: { code: 'scope_required', required_scope: 'messages:write', held_scopes: 'agents:read messages:read' },
    });
    expect(weak.problem.remedy).toContain(`SendMessage to ${app.urls.apiUrl}/a2a/<agentId>`);
    const room = await a2aClient(app.urls.siteUrl);
    expect(await rpcFailure(send(room, textMessage(['bob posts?']), bob))).toMatchObject({
      problem: { code: 'scope_required', required_scope: 'posts:write' },
    });

    expect(await rpcFailure(send(client, textMessage(['']), alice))).toMatchObject({ code: -32602, problem: { code: 'invalid_request', parameter: 'text' } });
    // A message of no part the room takes (data only) is A2A's own content type error.
    const dataOnly = textMessage([]);
    dataOnly.parts = [{ content: { $case: 'data', value: { not: 'text' } }, metadata: undefined, filename: '', mediaType: 'application/json' }];
    expect(await rpcFailure(send(client, dataOnly, alice))).toMatchObject({ code: -32005, reason: 'CONTENT_TYPE_NOT_SUPPORTED' });
    const long = await rpcFailure(send(client, textMessage(['x'.repeat(2_001)]), alice));
    expect(long).toMatchObject({ code: -32602, problem: { type: `${app.urls.siteUrl}/problems/text-too-long`, max_length: '2000', length: '2001' } });
    expect(long.problem.remedy).toContain("the message's text parts");
  });

  it('refuses a bad bearer token at the HTTP level: 401 with the challenge, a JSON-RPC error in the body', async () => {
    const { status, body } = await rpc(
      `${app.urls.apiUrl}/a2a/${bobId}`,
      'SendMessage',
      { message: textMessage(['x']) },
      { 'A2A-Version': '1.0', authorization: 'Bearer agt_forged' },
    );
    expect(status).toBe(401);
    expect(body).toMatchObject({ jsonrpc: '2.0', error: { code: -32041 } });
  });

  it('keeps no tasks: GetTask is task-not-found', async () => {
    const { body } = await rpc(`${app.urls.apiUrl}/a2a/${bobId}`, 'GetTask', { id: 'task-1' }, { 'A2A-Version': '1.0' });
    expect(body.error).toMatchObject({ code: -32001 });
  });
});

describe('A2A and the daily quota', () => {
  let app: Embedded;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000', QUOTA_PER_TOKEN: '3' });
  });

  afterAll(() => app.stop());

  it('answers a spent quota with rate_limited in the JSON-RPC error', async () => {
    const { token } = await signUp(app, ['messages:write'], 'chatty', ada);
    const self = await agentId(app, 'chatty');
    const client = await a2aClient(`${app.urls.apiUrl}/a2a/${self}`);
    for (let i = 0; i < 3; i += 1) await send(client, textMessage([`note ${i}`]), token);
    const spent = await rpcFailure(send(client, textMessage(['one too many']), token));
    expect(spent).toMatchObject({ code: -32029, problem: { code: 'rate_limited', limit: '3' } });
    expect(spent.problem.remedy).toContain('midnight UTC');
  });
});
