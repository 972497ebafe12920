import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { signUp } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { callTool, mcpClient } from '../support/mcp.js';
import { RoomClient } from '../support/room-client.js';

/**
 * One `tools/call` of a reading tool is answered by the MCP adapter's optimisation
 * (services/edge/src/mcp/fast.ts) without the SDK's server and transport; the same call with
 * `params._meta` (which it leaves to the SDK, and which changes nothing in the answer) goes through
 * the SDK. Both come through edge's one request path and must answer alike, byte for byte but for
 * what differs from one answer to the next by nature.
 */

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
/** Headers whose values differ from one answer to the next by nature. */
const VOLATILE = new Set(['date', 'x-request-id', 'ratelimit-remaining', 'ratelimit-reset', 'keep-alive']);

interface Answer {
  status: number;
  headers: [string, string][];
  body: string;
}

describe('MCP tools/call answered by the fast call and by the SDK (embedded)', () => {
  let app: Embedded;
  let reader: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    reader = (await signUp(app, ['agents:read'], 'fast-mcp-reader', ada)).token;
    const room = new RoomClient(`127.0.0.1:${app.roomPort}`);
    try {
      const agent = await room.agent('fast-mcp-poster', 'Ada');
      for (let i = 1; i <= 60; i += 1) await room.post(agent, `mcp ${i}`);
    } finally {
      room.close();
    }
  }, 60_000);

  afterAll(async () => {
    await app?.stop();
  });

  const rpc = async (body: string, headers: Record<string, string> = {}): Promise<Answer> => {
    const response = await fetch(`${app.urls.apiUrl}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', ...headers },
      body,
    });
    const kept: [string, string][] = [];
    response.headers.forEach((value, name) => {
      if (!VOLATILE.has(name)) kept.push([name, value]);
    });
    return { status: response.status, headers: kept, body: await response.text() };
  };

  /** One call on both paths: the same status, headers and bytes. */
  async function alike(id: string | number, name: string, args?: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Answer> {
    const params = { name, ...(args === undefined ? {} : { arguments: args }) };
    const fast = await rpc(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }), headers);
    const sdk = await rpc(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { ...params, _meta: {} } }), headers);
    expect(fast, `${name} ${JSON.stringify(args)}`).toEqual(sdk);
    return fast;
  }

  it('reads every page of the room alike, and what a reading tool answers', async () => {
    let cursor: string | undefined;
    let posts = 0;
    let id = 0;
    do {
      id += 1;
      const answer = await alike(id % 2 === 0 ? id : `call-${id}`, 'room_read_posts', { limit: 7, ...(cursor === undefined ? {} : { cursor }) });
      expect(answer.status).toBe(200);
      const { result } = JSON.parse(answer.body) as { result: { structuredContent: { data: unknown[]; next_cursor: string | null } } };
      posts += result.structuredContent.data.length;
      cursor = result.structuredContent.next_cursor ?? undefined;
    } while (cursor !== undefined);
    expect(posts).toBe(60);
    await alike(1, 'room_read_posts');
    await alike(2, 'room_read_posts', {});
    await alike(3, 'room_overview');
    await alike(4, 'room_how_to_connect', {});
    // Ids at the edges of what JSON-RPC and the SDK take.
    for (const id of [0, -1, '', Number.MAX_SAFE_INTEGER, 2 ** 60, 1.5]) await alike(id, 'room_read_posts', { limit: 1 });
  });

  it('refuses a bad argument alike, inside the result', async () => {
    for (const args of [{ limit: 0 }, { limit: 'ten' }, { cursor: 'AjE3OTU3MDA2ODU0NTAtMwJna4wG1JniFuFr5cLRM0Y' }, { surprise: true }]) {
      const answer = await alike(9, 'room_read_posts', args);
      expect(answer.status).toBe(200);
    }
  });

  it('answers alike with a token, a bad token, no-cache, and headers the SDK refuses', async () => {
    await alike(5, 'room_read_posts', { limit: 3 }, { authorization: `Bearer ${reader}` });
    expect((await alike(6, 'room_read_posts', { limit: 3 }, { authorization: 'Bearer agt_not_a_real_token' })).status).toBe(401);
    await alike(7, 'room_read_posts', { limit: 3 }, { 'cache-control': 'no-cache' });
    expect((await alike(8, 'room_read_posts', { limit: 3 }, { 'mcp-protocol-version': '1999-01-01' })).status).toBe(400);
    expect((await alike(9, 'room_read_posts', { limit: 3 }, { accept: 'application/json' })).status).toBe(406);
    expect((await alike(10, 'room_read_posts', { limit: 3 }, { origin: 'https://elsewhere.example' })).status).toBe(403);
  });

  it('refuses a body it cannot read alike (a chunked body is read by the parsers, not the plain lane)', async () => {
    const send = async (body: Buffer, chunked: boolean): Promise<Answer> => {
      const response = await fetch(`${app.urls.apiUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
        // A stream is sent chunked, without Content-Length: the body step reads it with express's parsers, not its plain lane.
        body: chunked ? new Blob([new Uint8Array(body)]).stream() : new Uint8Array(body),
        ...(chunked ? { duplex: 'half' } : {}),
      } as RequestInit);
      const kept: [string, string][] = [];
      response.headers.forEach((value, name) => {
        if (!VOLATILE.has(name) && name !== 'transfer-encoding') kept.push([name, value]);
      });
      return { status: response.status, headers: kept, body: await response.text() };
    };
    const call = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"room_read_posts","arguments":{"limit":1}}}';
    for (const body of [
      Buffer.from('{"jsonrpc": "2.0", "id": 1,'),
      Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":"'), Buffer.from([0xff, 0xfe]), Buffer.from('","method":"tools/call"}')]),
      Buffer.from('"tools/call"'),
      Buffer.from('   '),
      Buffer.from(''),
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(call)]),
      Buffer.from(`\n\t ${call}`),
    ]) {
      const fast = await send(body, false);
      const routed = await send(body, true);
      expect(fast, body.toString('utf8')).toEqual(routed);
    }
  });

  it("counts each call once, and answers the SDK's own client", async () => {
    const remaining = async (body: object): Promise<number> => {
      const response = await fetch(`${app.urls.apiUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify(body),
      });
      await response.arrayBuffer();
      return Number(response.headers.get('ratelimit-remaining'));
    };
    const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'room_read_posts', arguments: { limit: 1 } } };
    const first = await remaining(call);
    expect(await remaining({ ...call, params: { ...call.params, _meta: {} } })).toBe(first - 1);
    expect(await remaining(call)).toBe(first - 2);
    const client = await mcpClient(app);
    try {
      const result = await callTool(client, 'room_read_posts', { limit: 2 });
      expect(result.structuredContent).toMatchObject({ object: 'list', has_more: true });
      expect(result.content[0]?.text).toContain('2 posts, newest first');
    } finally {
      await client.close();
    }
  });
});
