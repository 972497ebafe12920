import { performance } from 'node:perf_hooks';
import { freePort } from '@agentroom/kit/local';
import { registry } from '@agentroom/kit/metrics';
import { until } from '@agentroom/testkit';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { post, signUp } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { Updates } from '../support/mcp-changes.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
const alan = { name: 'Alan Turing', password: 'the imitation game' };

/** How long a change may take to be told here: generous under a loaded test machine (`npm run bench` measures the delay). */
const TOLD_WITHIN_MS = 5_000;

/** What edge's MCP change notifications hold open now, by kind (`notifications`: agents' feeds watched; `session_streams`). */
async function watches(kind: 'notifications' | 'session_streams'): Promise<number> {
  const metric = await registry.getSingleMetric('agentroom_mcp_change_watches')?.get();
  return metric?.values.find((value) => value.labels.kind === kind)?.value ?? 0;
}

const notificationsUri = (agentId: string): string => `agentroom://agents/${agentId}/notifications`;
const messagesUri = (agentId: string): string => `agentroom://agents/${agentId}/messages`;

describe('MCP change notifications at {api_url}/mcp (embedded)', () => {
  let app: Embedded;
  /** Listens to its notifications over MCP; is mentioned and written to. */
  let listener: string;
  let listenerId: string;
  /** Another agent that listens, for the refusals. */
  let other: string;
  /** Posts and writes, over REST. */
  let poster: string;
  const closers: (() => Promise<void>)[] = [];
  let stopped = false;

  async function modernClient(token?: string): Promise<ModernClient> {
    const client = new ModernClient({ name: 'modern-host', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(
      new ModernTransport(new URL(`${app.urls.apiUrl}/mcp`), token ? { requestInit: { headers: { authorization: `Bearer ${token}` } } } : undefined),
    );
    closers.push(() => client.close());
    return client;
  }

  async function legacyClient(token?: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
    const client = new Client({ name: 'legacy-host', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(
      new URL(`${app.urls.apiUrl}/mcp`),
      token ? { requestInit: { headers: { authorization: `Bearer ${token}` } } } : undefined,
    );
    await client.connect(transport);
    closers.push(() => client.close());
    return { client, transport };
  }

  async function mention(text: string): Promise<{ id: string }> {
    const response = await post(app, poster, { text });
    expect(response.status, await response.clone().text()).toBe(201);
    return (await response.json()) as { id: string };
  }

  beforeAll(async () => {
    // A short grace at the end: the hosts' keep-alive sockets would hold the last test's stop for seconds.
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      SHUTDOWN_GRACE_MS: '500',
    });
    listener = (await signUp(app, ['messages:read', 'posts:write'], 'listener', ada)).token;
    other = (await signUp(app, ['messages:read'], 'other', ada)).token;
    poster = (await signUp(app, ['posts:write', 'messages:write'], 'poster', alan)).token;
    const agents = (await (await fetch(`${app.urls.baseUrl}/agents?limit=50`)).json()) as { data: { id: string; agentName: string }[] };
    listenerId = agents.data.find((agent) => agent.agentName === 'listener')?.id ?? '';
    expect(listenerId).not.toBe('');
  });

  afterAll(async () => {
    for (const close of closers) await close().catch(() => undefined);
    if (!stopped) await app?.stop();
  });

  describe('2026-07-28: subscriptions/listen', () => {
    it('declares resource subscriptions, and tells a listening host of a mention and of a new post', async () => {
      const client = await modernClient(listener);
      expect(client.getServerCapabilities()?.resources).toMatchObject({ subscribe: true });
      const updates = new Updates();
      client.setNotificationHandler('notifications/resources/updated', (notification) => updates.told(notification.params.uri));
      const wanted = [notificationsUri(listenerId), 'agentroom://posts'];
      const subscription = await client.listen({ resourceSubscriptions: wanted });
      expect(subscription.honoredFilter.resourceSubscriptions).toEqual(wanted);

      const sent = performance.now();
      await mention(`A question for @${listenerId}`);
      const delays = await Promise.all(wanted.map((uri) => updates.next(uri, TOLD_WITHIN_MS)));
      console.info(`2026-07-28 listen: mention told after ${Math.round(delays[0]! - sent)} ms, new post after ${Math.round(delays[1]! - sent)} ms`);
      await subscription.close();
      expect(await subscription.closed).toBe('local');
    });

    it("tells the thread's own URI of a reply in it, and the agent's messages URI of a direct message", async () => {
      const root = await mention('A thread to follow');
      const client = await modernClient(listener);
      const updates = new Updates();
      client.setNotificationHandler('notifications/resources/updated', (notification) => updates.told(notification.params.uri));
      const thread = `agentroom://posts/${root.id}`;
      const subscription = await client.listen({ resourceSubscriptions: [thread, messagesUri(listenerId)] });
      const reply = await post(app, poster, { text: 'A reply', reply_to: root.id });
      expect(reply.status).toBe(201);
      await updates.next(thread, TOLD_WITHIN_MS);
      const dm = await fetch(`${app.urls.baseUrl}/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${poster}` },
        body: JSON.stringify({ to: listenerId, text: 'Just between us' }),
      });
      expect(dm.status, await dm.clone().text()).toBe(201);
      await updates.next(messagesUri(listenerId), TOLD_WITHIN_MS);
      await subscription.close();
    });

    it("holds one notification watch for an agent's listen streams, closed with the last of them", async () => {
      // The streams of the tests before have closed: nothing is watched.
      await until('no notification feed watched', async () => (await watches('notifications')) === 0);
      const first = await modernClient(listener);
      const second = await modernClient(listener);
      const updates = new Updates();
      second.setNotificationHandler('notifications/resources/updated', (notification) => updates.told(notification.params.uri));
      const one = await first.listen({ resourceSubscriptions: [notificationsUri(listenerId)] });
      const two = await second.listen({ resourceSubscriptions: [notificationsUri(listenerId)] });
      expect(await watches('notifications')).toBe(1);
      await one.close();
      expect(await one.closed).toBe('local');
      // The watch the first stream shared is still open for the second.
      expect(await watches('notifications')).toBe(1);
      await mention(`Still there, @${listenerId}?`);
      await updates.next(notificationsUri(listenerId), TOLD_WITHIN_MS);
      await two.close();
      await until('the watch to close with the last stream', async () => (await watches('notifications')) === 0);
    });

    it("refuses to listen to another agent's notifications, and asks for a token without one", async () => {
      const stranger = await modernClient(other);
      await expect(stranger.listen({ resourceSubscriptions: [notificationsUri(listenerId)] })).rejects.toThrow(
        `agentroom://agents/${listenerId}/notifications is agent ${listenerId}'s own`,
      );
      // Without a token: MCP authorization's 401, with the challenge a host acts on.
      const response = await fetch(`${app.urls.apiUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 7,
          method: 'subscriptions/listen',
          params: {
            notifications: { resourceSubscriptions: [notificationsUri(listenerId)] },
            _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} },
          },
        }),
      });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toContain('Bearer');
      // The open URIs need no token.
      const anonymous = await modernClient();
      const open = await anonymous.listen({ resourceSubscriptions: ['agentroom://posts'] });
      expect(open.honoredFilter.resourceSubscriptions).toEqual(['agentroom://posts']);
      await open.close();
    });
  });

  describe('2025-11-25: resources/subscribe on the session stream', () => {
    it('tells a subscribed host of a mention and of a new post on its GET stream', async () => {
      const { client, transport } = await legacyClient(listener);
      expect(transport.sessionId).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(client.getServerCapabilities()?.resources).toMatchObject({ subscribe: true });
      const updates = new Updates();
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => updates.told(notification.params.uri));
      const wanted = [notificationsUri(listenerId), 'agentroom://posts'];
      for (const uri of wanted) await client.subscribeResource({ uri });

      const sent = performance.now();
      await mention(`Another question for @${listenerId}`);
      const delays = await Promise.all(wanted.map((uri) => updates.next(uri, TOLD_WITHIN_MS)));
      console.info(`2025-11-25 session: mention told after ${Math.round(delays[0]! - sent)} ms, new post after ${Math.round(delays[1]! - sent)} ms`);

      // Unsubscribed, the posts URI is told no more; the notifications URI still is.
      await client.unsubscribeResource({ uri: 'agentroom://posts' });
      await mention(`Once more, @${listenerId}`);
      await updates.next(notificationsUri(listenerId), TOLD_WITHIN_MS);
      expect(updates.count('agentroom://posts')).toBe(1);
    });

    it("refuses another agent's URI, and a subscription without a session", async () => {
      const { client } = await legacyClient(other);
      await expect(client.subscribeResource({ uri: notificationsUri(listenerId) })).rejects.toThrow(`is agent ${listenerId}'s own`);
      const response = await fetch(`${app.urls.apiUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'resources/subscribe', params: { uri: 'agentroom://posts' } }),
      });
      const answer = (await response.json()) as { error?: { message: string } };
      expect(answer.error?.message).toContain('Mcp-Session-Id');
    });

    it('ends a session on DELETE: its stream closes, and every later request bearing it is 404', async () => {
      const { client, transport } = await legacyClient();
      const session = transport.sessionId ?? '';
      await client.subscribeResource({ uri: 'agentroom://posts' });
      // A second stream of the session, read here: DELETE ends it.
      const open = await fetch(`${app.urls.apiUrl}/mcp`, { headers: { accept: 'text/event-stream', 'mcp-session-id': session } });
      expect(open.status).toBe(200);
      const ended = open.text();
      await transport.terminateSession();
      await expect(ended).resolves.toBeTypeOf('string');
      const stream = await fetch(`${app.urls.apiUrl}/mcp`, { headers: { accept: 'text/event-stream', 'mcp-session-id': session } });
      expect(stream.status).toBe(404);
      // Every later request bearing it is 404 (2025-11-25), the fast path's reading tool call included.
      const bearing = (id: number, method: string, params: Record<string, unknown>): Promise<Response> =>
        fetch(`${app.urls.apiUrl}/mcp`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': '2025-11-25',
            'mcp-session-id': session,
          },
          body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
        });
      for (const [id, method, params] of [
        [4, 'resources/subscribe', { uri: 'agentroom://posts' }],
        [5, 'tools/list', {}],
        [6, 'tools/call', { name: 'room_read_posts', arguments: {} }],
      ] as const) {
        const answer = await bearing(id, method, params);
        expect(answer.status, method).toBe(404);
        expect(await answer.json()).toEqual({ jsonrpc: '2.0', id, error: { code: -32001, message: 'Session not found' } });
      }
    });

    it('answers a GET without a session 400, and one of an unknown shape 404', async () => {
      expect((await fetch(`${app.urls.apiUrl}/mcp`, { headers: { accept: 'text/event-stream' } })).status).toBe(400);
      expect((await fetch(`${app.urls.apiUrl}/mcp`, { headers: { accept: 'text/event-stream', 'mcp-session-id': 'nope' } })).status).toBe(404);
    });
  });

  // Last: it stops the product.
  it('ends a listen stream gracefully and a session stream when edge shuts down, for hosts to reconnect elsewhere', async () => {
    const client = await modernClient();
    const subscription = await client.listen({ resourceSubscriptions: ['agentroom://posts'] });
    const { client: legacy, transport } = await legacyClient();
    await legacy.subscribeResource({ uri: 'agentroom://posts' });
    const stream = await fetch(`${app.urls.apiUrl}/mcp`, { headers: { accept: 'text/event-stream', 'mcp-session-id': transport.sessionId ?? '' } });
    expect(stream.status).toBe(200);
    const ended = stream.text();
    stopped = true;
    await app.stop();
    expect(await subscription.closed).toBe('graceful');
    await expect(ended).resolves.toBeTypeOf('string');
  });
});
