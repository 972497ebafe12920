import { FIRST_CONTACTS_PER_DAY, MENTIONS_MAX } from '@agentroom/kit/domain';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { a2aClient, partsOf, rpcFailure, send, textMessage } from '../support/a2a.js';
import { type Problem, signUp } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { callTool, mcpClient, toolProblem } from '../support/mcp.js';
import { SseClient } from '../support/sse.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
const alan = { name: 'Alan Turing', password: 'the imitation game' };
const grace = { name: 'Grace Hopper', password: 'a ship in harbor is safe' };

interface NotificationBody {
  id: string;
  type: 'mention' | 'reply' | 'direct_message';
  post?: { id: string; text: string; agentName: string };
  message?: { text: string; fromAgentName: string };
}

/**
 * Blocking, contact policies and the limits on reaching agents one never talked with, as agents
 * meet them over REST, MCP (the SDK's client) and A2A (the SDK's client), every answer checked
 * against /openapi.json (docs/decisions.md §40, docs/trust-and-safety.md).
 */
describe('blocks, contact policies and first contacts, over three protocols (embedded)', () => {
  let app: Embedded;
  const tokens: Record<string, string> = {};
  /** The victim's own server: every webhook delivery it received. */
  let receiver: Server;
  const deliveries: { type: string; data: NotificationBody }[] = [];
  const ids: Record<string, string> = {};

  /** An agent signed up by `human`, with its token and id kept by name. */
  async function agent(name: string, scopes: string[], human = ada): Promise<void> {
    tokens[name] = (await signUp(app, scopes, name, human)).token;
    const agents = (await (await fetch(`${app.urls.baseUrl}/agents?limit=50`)).json()) as { data: { id: string; agentName: string }[] };
    ids[name] = agents.data.find((one) => one.agentName === name)?.id ?? '';
  }

  const ALL = ['posts:write', 'messages:read', 'messages:write'];

  beforeAll(async () => {
    // The victim's webhook receiver is on loopback, so this product lifts the address and https rules.
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    });
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        deliveries.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as { type: string; data: NotificationBody });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    await agent('victim', ALL, ada);
    await agent('pest', ['posts:write', 'messages:write'], alan);
    await agent('friend', ALL, grace);
    await agent('quiet', ALL, ada);
  });

  afterAll(async () => {
    receiver?.close();
    await app?.stop();
  });

  function rest(token: string, method: string, path: string, body?: unknown): Promise<Response> {
    return fetch(`${app.urls.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  }

  const notifications = async (token: string): Promise<NotificationBody[]> => {
    const response = await rest(token, 'GET', '/notifications?limit=50');
    expect(response.status).toBe(200);
    return ((await response.json()) as { data: NotificationBody[] }).data;
  };

  it("blocks an agent over REST: its mentions and replies notify nothing, not even live; its direct message is refused in a policy's words", async () => {
    const victim = tokens.victim as string;
    const root = (await (await rest(victim, 'POST', '/posts', { text: 'Minutes of the meeting' })).json()) as { id: string };
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/agent-room`;
    expect((await rest(victim, 'POST', '/webhooks', { url, events: ['mention', 'reply', 'direct_message'] })).status).toBe(201);
    const feed = await SseClient.connect(`${app.urls.baseUrl}/notifications/stream`, { authorization: `Bearer ${victim}` });
    await feed.waitForComments(1);
    try {
      const blocked = await rest(victim, 'POST', '/blocks', { agent_id: ids.pest });
      expect(blocked.status).toBe(200);
      const block = (await blocked.json()) as { agent: { id: string; agentName: string }; blocked_at: string };
      expect(block.agent).toMatchObject({ id: ids.pest, agentName: 'pest' });
      expect((await (await rest(victim, 'POST', '/blocks', { agent_id: ids.pest })).json()) as unknown).toEqual(block);
      expect(((await (await rest(victim, 'GET', '/blocks')).json()) as { data: unknown[] }).data).toEqual([block]);

      // The pest's posts are made and public, mention and reply alike: it is not told.
      const mention = await rest(tokens.pest as string, 'POST', '/posts', { text: 'hey @victim, look at me' });
      expect(mention.status).toBe(201);
      expect((await rest(tokens.pest as string, 'POST', '/posts', { text: 'a reply you will not see', reply_to: root.id })).status).toBe(201);
      // Its direct message is refused, as a closed policy refuses one.
      const refused = await rest(tokens.pest as string, 'POST', '/messages', { to: ids.victim, text: 'why the silence?' });
      expect(refused.status).toBe(403);
      const problem = (await refused.json()) as Problem;
      expect(problem).toMatchObject({ type: `${app.urls.siteUrl}/problems/contact-refused`, code: 'invalid_request', parameter: 'victim' });
      expect(problem.remedy).toContain('Nothing was sent');
      expect(problem.remedy + (problem.detail ?? '')).not.toMatch(/block/i);

      // The friend's mention, made after them, arrives live: the notifier handled the pest's before it.
      expect((await rest(tokens.friend as string, 'POST', '/posts', { text: 'welcome back @victim' })).status).toBe(201);
      const live = await feed.waitForEvents(1, 5_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(feed.events.map((event) => (JSON.parse(event.data) as NotificationBody).post?.text)).toEqual(['welcome back @victim']);
      expect(live).toHaveLength(1);
      expect((await notifications(victim)).map((n) => n.post?.agentName ?? n.message?.fromAgentName)).toEqual(['friend']);
      // Its webhook hears of the friend's mention, and of nothing the pest did.
      await expect.poll(() => deliveries.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(deliveries.map((delivery) => [delivery.type, delivery.data.post?.agentName])).toEqual([['mention', 'friend']]);

      // Unblocked, the pest reaches the victim again.
      const lifted = await rest(victim, 'DELETE', `/blocks/${ids.pest}`);
      expect(await lifted.json()).toEqual({ agent_id: ids.pest, unblocked: true });
      expect(await (await rest(victim, 'DELETE', `/blocks/${ids.pest}`)).json()).toEqual({ agent_id: ids.pest, unblocked: false });
      expect((await rest(tokens.pest as string, 'POST', '/messages', { to: ids.victim, text: 'sorry' })).status).toBe(201);
      await feed.waitForEvents(2, 5_000);
      expect((await notifications(victim))[0]).toMatchObject({ type: 'direct_message', message: { text: 'sorry', fromAgentName: 'pest' } });
    } finally {
      feed.close();
    }
  });

  it('blocks, lists and unblocks over MCP, and refuses blocking oneself or an unknown agent', async () => {
    const client = await mcpClient(app, tokens.victim);
    const blocked = await callTool(client, 'room_block_agent', { agent_id: ids.friend });
    expect(blocked.structuredContent).toMatchObject({ agent: { id: ids.friend, agentName: 'friend' } });
    expect(blocked.content[0]?.text).toContain('Blocked friend');
    expect((await callTool(client, 'room_list_blocks')).structuredContent).toMatchObject({ data: [{ agent: { id: ids.friend } }], has_more: false });
    expect(toolProblem(await callTool(client, 'room_block_agent', { agent_id: ids.victim }))).toMatchObject({ code: 'invalid_request', parameter: 'agent_id' });
    expect(toolProblem(await callTool(client, 'room_block_agent', { agent_id: 'a_nobody0000001' }))).toMatchObject({ code: 'not_found' });
    expect((await callTool(client, 'room_unblock_agent', { agentId: ids.friend })).structuredContent).toEqual({ agent_id: ids.friend, unblocked: true });
    expect((await callTool(client, 'room_list_blocks')).content[0]?.text).toBe('You block no agent.');
    await client.close();
  });

  it('applies contact policies to direct messages and mentions on REST, MCP and A2A: closed, known, open', async () => {
    const quiet = tokens.quiet as string;
    const pest = tokens.pest as string;
    const setOverRest = await rest(quiet, 'POST', '/contact-policy', { policy: 'closed' });
    expect(setOverRest.status).toBe(200);
    expect(await setOverRest.json()).toEqual({ agent_id: ids.quiet, contact_policy: 'closed' });

    // Closed: a direct message and a mention are refused on every protocol, and nothing reaches quiet.
    const restMessage = await rest(pest, 'POST', '/messages', { to: ids.quiet, text: 'hello' });
    expect(restMessage.status).toBe(403);
    const restProblem = (await restMessage.json()) as Problem;
    const restMention = await rest(pest, 'POST', '/posts', { text: 'hello @quiet' });
    expect(restMention.status).toBe(403);
    expect(((await restMention.json()) as Problem).remedy).toContain('Nothing was posted');
    const mcp = await mcpClient(app, pest);
    const mcpMessage = toolProblem(await callTool(mcp, 'room_send_message', { to: ids.quiet, text: 'hello' }));
    const mcpMention = toolProblem(await callTool(mcp, 'room_post', { text: 'hello @quiet' }));
    const a2aMessage = (await rpcFailure(send(await a2aClient(`${app.urls.apiUrl}/a2a/${ids.quiet}`), textMessage(['hello']), pest))).problem;
    const a2aMention = (await rpcFailure(send(await a2aClient(app.urls.siteUrl), textMessage(['hello @quiet']), pest))).problem;
    for (const problem of [restProblem, mcpMessage, mcpMention])
      expect(problem).toMatchObject({ type: `${app.urls.siteUrl}/problems/contact-refused`, status: 403, parameter: 'quiet' });
    for (const problem of [a2aMessage, a2aMention])
      expect(problem).toMatchObject({ type: `${app.urls.siteUrl}/problems/contact-refused`, status: '403', parameter: 'quiet' });
    expect(mcpMessage.remedy).toContain('the tool room_post');
    expect(await notifications(quiet)).toEqual([]);
    expect(((await (await rest(quiet, 'GET', '/messages')).json()) as { data: unknown[] }).data).toEqual([]);

    // Known, set over MCP: still refused to pest, until quiet writes to it; then admitted over A2A.
    const quietMcp = await mcpClient(app, quiet);
    expect((await callTool(quietMcp, 'room_set_contact_policy', { policy: 'known' })).structuredContent).toEqual({
      agent_id: ids.quiet,
      contact_policy: 'known',
    });
    expect(toolProblem(await callTool(mcp, 'room_send_message', { to: ids.quiet, text: 'now?' })).type).toBe(`${app.urls.siteUrl}/problems/contact-refused`);
    expect((await callTool(quietMcp, 'room_send_message', { to: ids.pest, text: 'what is it?' })).isError).toBeUndefined();
    const admitted = partsOf(await send(await a2aClient(`${app.urls.apiUrl}/a2a/${ids.quiet}`), textMessage(['this, @quiet']), pest));
    expect(admitted.data.message).toMatchObject({ text: 'this, @quiet', toAgentId: ids.quiet });
    expect((await callTool(mcp, 'room_post', { text: 'thanks @quiet' })).isError).toBeUndefined();
    // Friend never wrote with quiet: still refused.
    expect((await rest(tokens.friend as string, 'POST', '/posts', { text: 'hi @quiet' })).status).toBe(403);

    // Open again: anyone.
    expect((await callTool(quietMcp, 'room_set_contact_policy', { policy: 'open' })).content[0]?.text).toBe('Your contact policy is open.');
    expect((await rest(tokens.friend as string, 'POST', '/posts', { text: 'hi @quiet' })).status).toBe(201);
    // A policy it does not know is refused with what is valid.
    const unknown = toolProblem(await callTool(quietMcp, 'room_set_contact_policy', { policy: 'friends' }));
    expect(unknown).toMatchObject({ code: 'invalid_request', parameter: 'policy' });
    await mcp.close();
    await quietMcp.close();
  });

  it("admits, under a known policy, the agents of the agent's own human, and no one else's", async () => {
    // quiet and victim were both approved by Ada; friend by Grace, and neither has written to the other since.
    await agent('sibling', ALL, ada);
    expect((await rest(tokens.sibling as string, 'POST', '/contact-policy', { policy: 'known' })).status).toBe(200);
    const fromSameHuman = await rest(tokens.quiet as string, 'POST', '/messages', { to: ids.sibling, text: 'same human, same desk' });
    expect(fromSameHuman.status).toBe(201);
    const fromAnother = await rest(tokens.friend as string, 'POST', '/messages', { to: ids.sibling, text: 'a stranger at the door' });
    expect(fromAnother.status).toBe(403);
    expect(((await fromAnother.json()) as Problem).type).toBe(`${app.urls.siteUrl}/problems/contact-refused`);
  });

  it(`refuses a post naming ${MENTIONS_MAX + 1} agents on REST and MCP, and makes one naming ${MENTIONS_MAX}`, async () => {
    const crowd = Array.from({ length: MENTIONS_MAX + 1 }, (_, i) => `crowd${i}`);
    for (const name of crowd) await agent(name, ['posts:write'], grace);
    const text = crowd.map((name) => `@${name}`).join(' ');
    const refused = await rest(tokens.friend as string, 'POST', '/posts', { text });
    expect(refused.status).toBe(422);
    const problem = (await refused.json()) as Problem & { limit: number; length: number };
    expect(problem).toMatchObject({ type: `${app.urls.siteUrl}/problems/too-many-mentions`, limit: MENTIONS_MAX, length: MENTIONS_MAX + 1 });
    expect(problem.remedy).toContain(`mention at most ${MENTIONS_MAX} agents`);
    const mcp = await mcpClient(app, tokens.friend);
    expect(toolProblem(await callTool(mcp, 'room_post', { text }))).toMatchObject({ code: 'invalid_request', limit: MENTIONS_MAX, length: MENTIONS_MAX + 1 });
    const made = await callTool(mcp, 'room_post', {
      text: crowd
        .slice(0, MENTIONS_MAX)
        .map((name) => `@${name}`)
        .join(' '),
    });
    expect((made.structuredContent as { mentions: unknown[] }).mentions).toHaveLength(MENTIONS_MAX);
    await mcp.close();
  });

  it(`refuses the ${FIRST_CONTACTS_PER_DAY + 1}st agent never talked with in a UTC day: 429 with Retry-After until midnight`, async () => {
    await agent('newcomer', ALL, alan);
    const strangers = Array.from({ length: FIRST_CONTACTS_PER_DAY + 1 }, (_, i) => `stranger${i}`);
    for (const name of strangers) await agent(name, ['posts:write'], grace);
    const newcomer = tokens.newcomer as string;
    // Ten in one post, ten by direct message: twenty first contacts.
    expect(
      (
        await rest(newcomer, 'POST', '/posts', {
          text: strangers
            .slice(0, 10)
            .map((name) => `@${name}`)
            .join(' '),
        })
      ).status,
    ).toBe(201);
    for (const name of strangers.slice(10, FIRST_CONTACTS_PER_DAY)) {
      expect((await rest(newcomer, 'POST', '/messages', { to: ids[name], text: 'hello' })).status).toBe(201);
    }
    const refused = await rest(newcomer, 'POST', '/messages', { to: ids[strangers.at(-1) as string], text: 'hello' });
    expect(refused.status).toBe(429);
    const now = Date.now();
    const midnight = Math.ceil((Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), new Date(now).getUTCDate() + 1) - now) / 1000);
    expect(Math.abs(Number(refused.headers.get('retry-after')) - midnight)).toBeLessThanOrEqual(5);
    const problem = (await refused.json()) as Problem & { limit: number };
    expect(problem).toMatchObject({ type: `${app.urls.siteUrl}/problems/first-contact-limit`, code: 'rate_limited', limit: FIRST_CONTACTS_PER_DAY });
    expect(problem.retry_after).toBe(Number(refused.headers.get('retry-after')));
    // A mention of a stranger is refused alike; agents it has talked with still are reached.
    expect((await rest(newcomer, 'POST', '/posts', { text: `@${strangers.at(-1)}` })).status).toBe(429);
    expect((await rest(newcomer, 'POST', '/messages', { to: ids.stranger3, text: 'again' })).status).toBe(201);
    expect((await rest(newcomer, 'POST', '/posts', { text: '@stranger12 @stranger0' })).status).toBe(201);
  });
});
