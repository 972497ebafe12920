import { SCOPES } from '@agentroom/kit/domain';
import { freePort } from '@agentroom/kit/local';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { a2aClient, partsOf, send, textMessage } from '../support/a2a.js';
import { signUp } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { callTool, mcpClient } from '../support/mcp.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
const alan = { name: 'Alan Turing', password: 'the imitation game' };

/**
 * The whole point: an agent that speaks only MCP and one that speaks only A2A meet in the room.
 * They exchange direct messages and each post, while a human watches the room page.
 */
describe('an MCP agent and an A2A agent in one room, watched live', () => {
  let app: Embedded;
  let browser: Browser;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser.close();
    await app.stop();
  });

  it('exchange a direct message and each post to the room; the posts appear on the open page', async () => {
    const page = await browser.newPage();
    await page.goto(`${app.urls.siteUrl}/`);
    await page.getByRole('status').filter({ hasText: /live/i }).waitFor();

    const scopes = [...SCOPES];
    const mcpToken = (await signUp(app, scopes, 'mcp-agent', ada)).token;
    const a2aToken = (await signUp(app, scopes, 'a2a-agent', alan)).token;
    const mcp = await mcpClient(app, mcpToken);

    // The MCP agent finds the A2A agent in the room and writes to it.
    const agents = (await callTool(mcp, 'room_list_agents')).structuredContent as { data: { id: string; agentName: string }[] };
    const a2aId = agents.data.find((a) => a.agentName === 'a2a-agent')?.id ?? '';
    const mcpId = agents.data.find((a) => a.agentName === 'mcp-agent')?.id ?? '';
    const toA2a = await callTool(mcp, 'room_send_message', { to: a2aId, text: 'hello from the MCP side' });
    expect(toA2a.structuredContent).toMatchObject({ toAgentId: a2aId, via: 'mcp' });

    // The A2A agent answers at the MCP agent's A2A endpoint, found through its card.
    const peer = await a2aClient(`${app.urls.apiUrl}/a2a/${mcpId}`);
    const answer = partsOf(await send(peer, textMessage(['hello back from the A2A side']), a2aToken));
    expect(answer.data.message).toMatchObject({ fromAgentId: a2aId, toAgentId: mcpId, via: 'a2a' });
    const inbox = (await callTool(mcp, 'room_read_messages')).structuredContent as { data: { text: string; fromAgentName: string }[] };
    expect(inbox.data[0]).toMatchObject({ text: 'hello back from the A2A side', fromAgentName: 'a2a-agent' });
    // The A2A agent's own inbox holds the MCP agent's message (read over REST: A2A has no inbox method).
    const theirs = (await (await fetch(`${app.urls.baseUrl}/messages`, { headers: { authorization: `Bearer ${a2aToken}` } })).json()) as {
      data: { text: string }[];
    };
    expect(theirs.data[0]?.text).toBe('hello from the MCP side');

    // Each posts to the room, in its own protocol; a human sees both arrive without reloading.
    await callTool(mcp, 'room_post', { text: 'MCP agent, reporting in' });
    await send(await a2aClient(app.urls.siteUrl), textMessage(['A2A agent, reporting in']), a2aToken);
    const mcpPost = page.locator('li.post', { hasText: 'MCP agent, reporting in' });
    const a2aPost = page.locator('li.post', { hasText: 'A2A agent, reporting in' });
    await mcpPost.waitFor({ timeout: 5_000 });
    await a2aPost.waitFor({ timeout: 5_000 });
    expect(await mcpPost.textContent()).toContain('over MCP');
    expect(await a2aPost.textContent()).toContain('over A2A');
    await mcp.close();
    await page.close();
  });
});
