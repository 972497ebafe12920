import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { a2aClient, partsOf, rpcFailure, send, textMessage } from '../support/a2a.js';
import { post, type Problem, signUp } from '../support/agent.js';
import { callTool, mcpClient, refusedToolCall } from '../support/mcp.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };

/** One protocol-neutral core: the same call gives the same answer on REST, MCP and A2A. */
describe('one core, three protocols (embedded)', () => {
  let app: Embedded;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
  });

  afterAll(() => app.stop());

  it('refuses the same missing scope with the same code, type and scopes everywhere; each remedy names its own protocol', async () => {
    const { token } = await signUp(app, ['agents:read'], 'onlooker', ada);
    const agents = (await (await fetch(`${app.urls.baseUrl}/agents`)).json()) as { data: { id: string }[] };
    const to = agents.data[0]?.id ?? '';

    const restResponse = await fetch(`${app.urls.baseUrl}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ to, text: 'hi' }),
    });
    const rest = (await restResponse.json()) as Problem;
    const client = await mcpClient(app, token);
    const mcp = (await refusedToolCall(client, 'room_send_message', { to, text: 'hi' })).problem;
    await client.close();
    const a2a = (await rpcFailure(send(await a2aClient(`${app.urls.apiUrl}/a2a/${to}`), textMessage(['hi']), token))).problem;

    const shared = {
      type: `${app.urls.siteUrl}/problems/scope-required`,
      code: 'scope_required',
      status: 403,
      required_scope: 'messages:write',
      held_scopes: ['agents:read'],
    };
    expect(restResponse.status).toBe(403);
    expect(rest).toMatchObject(shared);
    expect(mcp).toMatchObject(shared);
    expect(a2a).toMatchObject({ ...shared, status: '403', held_scopes: 'agents:read' });
    // Every remedy names the signup call that fixes it, and the call to repeat in its own protocol's words.
    for (const remedy of [rest.remedy, mcp.remedy, a2a.remedy ?? ''])
      expect(remedy).toContain(`POST ${app.urls.apiUrl}/agent/signup/start with {"scopes":["agents:read","messages:write"]}`);
    expect(rest.remedy).toContain(`POST ${app.urls.baseUrl}/messages`);
    expect(mcp.remedy).toContain('the tool room_send_message');
    expect(a2a.remedy).toContain(`SendMessage to ${app.urls.apiUrl}/a2a/<agentId>`);
  });

  it("counts one token's calls in one daily bucket, whichever protocol carries them", async () => {
    const { token } = await signUp(app, ['posts:write'], 'counted', ada);
    const remaining = (response: Response): number => Number(response.headers.get('ratelimit-remaining'));
    const auth = { authorization: `Bearer ${token}` };
    const first = remaining(await fetch(`${app.urls.baseUrl}/posts?limit=1`, { headers: auth }));
    const mcp = await fetch(`${app.urls.apiUrl}/mcp`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'room_read_posts', arguments: { limit: 1 } } }),
    });
    expect(mcp.status).toBe(200);
    const a2a = await fetch(`${app.urls.apiUrl}/a2a`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', 'A2A-Version': '1.0' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'SendMessage',
        params: { message: { messageId: 'counted-1', role: 'ROLE_USER', parts: [{ text: 'counted' }] } },
      }),
    });
    expect(a2a.status).toBe(200);
    const last = remaining(await fetch(`${app.urls.baseUrl}/posts?limit=1`, { headers: auth }));
    expect([remaining(mcp), remaining(a2a), last]).toEqual([first - 1, first - 2, first - 3]);
    // Anonymous calls count against the address, not the token.
    expect(first).toBeLessThan(Number(mcp.headers.get('ratelimit-limit')));
  });

  it('makes one post of one idempotency key, first used on REST, then as MCP idempotency_key and as the A2A message id', async () => {
    const { token } = await signUp(app, ['posts:write'], 'careful', ada);
    const key = 'one-post-three-protocols';
    const first = await post(app, token, { text: 'said once' }, { 'idempotency-key': key });
    expect(first.status).toBe(201);
    const created = (await first.json()) as { id: string; via: string };
    expect(created.via).toBe('rest');
    const client = await mcpClient(app, token);
    const viaMcp = await callTool(client, 'room_post', { text: 'said once', idempotency_key: key });
    await client.close();
    expect(viaMcp.structuredContent).toEqual(created);
    expect(viaMcp._meta).toMatchObject({ 'agentroom/idempotent-replayed': true });
    const viaA2a = partsOf(await send(await a2aClient(app.urls.siteUrl), textMessage(['said once'], key), token));
    expect(viaA2a.data.post).toEqual(created);
    const listed = (await (await fetch(`${app.urls.baseUrl}/posts?limit=50`)).json()) as { data: { text: string }[] };
    expect(listed.data.filter((p) => p.text === 'said once')).toHaveLength(1);
  });
});
