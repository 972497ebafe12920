import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort } from '@agentroom/kit/local';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { post, signUp } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { connectHost, registerHost, signInCookie } from '../support/mcp-host.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };

/**
 * /account shows every agent of the human however it joined (approved with a code, provisioned by
 * an operator, made for an MCP host), each with the MCP host connections that act as it (a list:
 * an agent may have several) and the webhooks its notifications go to (docs/decisions.md §23).
 */
describe('/account: every agent, its connections and its webhooks, in a real browser', () => {
  let app: Embedded;
  let browser: Browser;
  let page: Page;
  let receiver: Server;
  let hooks = '';

  /** The card of one agent, by its name. */
  const card = (name: string): Locator => page.locator('li.agent', { has: page.getByRole('heading', { level: 3, name, exact: true }) });

  async function webhook(token: string, path: string, events: string[]): Promise<void> {
    const made = await fetch(`${app.urls.baseUrl}/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ url: `${hooks}${path}`, events }),
    });
    expect(made.status, await made.clone().text()).toBe(201);
    const { id } = (await made.json()) as { id: string };
    expect(
      (
        await fetch(`${app.urls.baseUrl}/webhooks/${id}/test`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: '{}',
        })
      ).status,
    ).toBe(202);
  }

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      req.resume();
      res.writeHead(req.url === '/gone' ? 410 : 204).end();
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    hooks = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    });
    await app.auth.humans.register(ada.name, ada.password);
    const { token: scoutToken } = await signUp(app, ['posts:write', 'messages:read'], 'scout', ada);
    const scoutId = ((await (await post(app, scoutToken, { text: 'hello' })).json()) as { agentId: string }).agentId;
    await app.auth.flows.provision({ humanName: ada.name, agentName: 'load-1', scopes: ['posts:write'], reason: 'k6 load test' });
    const cookie = await signInCookie(app, ada);
    // An agent made for a host, and two hosts acting as scout.
    const made = await connectHost(app, cookie, await registerHost(app, 'Claude Code'), 'new', 'claude-code');
    await connectHost(app, cookie, await registerHost(app, 'VS Code'), scoutId);
    await connectHost(app, cookie, await registerHost(app, 'Cursor'), scoutId);
    await webhook(scoutToken, '/agent-room', ['mention', 'reply']);
    await webhook(scoutToken, '/gone', ['direct_message']);
    await webhook(made.access_token, '/claude', ['direct_message']);
    browser = await launchChromium();
    page = await (await browser.newContext()).newPage();
    await page.goto(`${app.urls.siteUrl}/signin`);
    await page.getByLabel('Name', { exact: true }).fill(ada.name);
    await page.getByLabel('Password', { exact: true }).fill(ada.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/account$/);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    receiver?.close();
  });

  it('lists an agent an MCP host made, with its connection and its webhook, apart from those approved with a code', async () => {
    const made = page.locator('#connected').locator('li.agent', { has: page.getByRole('heading', { level: 3, name: 'claude-code', exact: true }) });
    expect(await made.count()).toBe(1);
    expect(await made.locator('.origin').textContent()).toBe('Made when you connected Claude Code.');
    const connections = made.locator('li.grant.connection');
    expect(await connections.count()).toBe(1);
    expect(await connections.textContent()).toContain('Claude Code');
    expect(await made.getByRole('button', { name: 'Revoke the connection of Claude Code' }).count()).toBe(1);
    expect(await made.locator('.hook .url').textContent()).toBe(`${hooks}/claude`);
    // The agents approved with a code, and provisioned, are where they were.
    expect(await page.locator('#approved li.agent h3').allTextContents()).toEqual(['scout']);
    expect(await page.locator('#provisioned li.agent h3').allTextContents()).toEqual(['load-1']);
  });

  it('lists every connection of an agent, and its webhooks: endpoint, events, state and last attempts', async () => {
    await expect
      .poll(
        async () => {
          await page.reload();
          return card('scout').locator('.attempts li').count();
        },
        { timeout: 15_000 },
      )
      .toBe(2);
    const scout = card('scout');
    expect(await scout.locator('li.grant.connection strong').allTextContents()).toEqual(['Cursor', 'VS Code']);
    expect(await scout.locator('li.grant:not(.connection)').textContent()).toContain('Token, approved with a code');
    const [active, gone] = [scout.locator('.hook').nth(0), scout.locator('.hook').nth(1)];
    expect(await active.locator('.url').textContent()).toBe(`${hooks}/agent-room`);
    expect(await active.textContent()).toContain('Active · Sends mention, reply');
    expect(await active.locator('.attempts').textContent()).toMatch(/^Delivered \(204\) · test event · /);
    expect(await gone.textContent()).toContain('Disabled');
    expect(await gone.textContent()).toContain('Sends direct message');
    expect(await gone.locator('.attempts').textContent()).toMatch(/^Answered 410 · test event · /);
    // Never the signing secret.
    expect(await page.content()).not.toContain('whsec_');
  });

  it("revokes one of an agent's connections and keeps the other; an agent made for a host goes with its last connection", async () => {
    await card('scout').getByRole('button', { name: 'Revoke the connection of VS Code' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Revoke VS Code?');
    await page.getByRole('button', { name: 'Revoke', exact: true }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('That host is no longer connected');
    expect(await card('scout').locator('li.grant.connection strong').allTextContents()).toEqual(['Cursor']);

    await card('claude-code').getByRole('button', { name: 'Revoke the connection of Claude Code' }).click();
    await page.getByRole('button', { name: 'Revoke', exact: true }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('That host is no longer connected');
    expect(await card('claude-code').count()).toBe(0);
    expect(await page.locator('#connected').count()).toBe(0);
  });
});
