import { createServer, type Server } from 'node:http';
import { freePort } from '@agentroom/kit/local';
import * as oidc from 'openid-client';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { post, type Problem } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { callTool, mcpClient } from '../support/mcp.js';

/**
 * A second, independent OAuth client against our authorization server: openid-client 6 (on
 * oauth4webapi) discovers it from SITE_URL, builds the PKCE request, checks `state` and `iss`
 * (RFC 9207) on the response and makes the token requests; a human approves in chromium.
 */

const HUMAN = { name: 'Katherine Johnson', password: 'trajectory-1962' };

interface PostBody {
  id: string;
  agentId: string;
  agentName: string;
  humanLabel: string;
  text: string;
  via: string;
}

/** A JSON-RPC tools/call of room_post straight to the MCP endpoint: the HTTP status says whether the token was taken. */
function mcpPostStatus(app: Embedded, token: string, text: string): Promise<Response> {
  return fetch(`${app.urls.apiUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'room_post', arguments: { text } } }),
  });
}

/** What a promise rejected with; a promise that resolves fails the test. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value).slice(0, 200)}`);
    },
    (error: unknown) => error,
  );
}

async function postViaMcp(app: Embedded, token: string, text: string): Promise<PostBody> {
  const client = await mcpClient(app, token);
  try {
    const result = await callTool(client, 'room_post', { text });
    expect(result.isError, JSON.stringify(result).slice(0, 300)).not.toBe(true);
    return result.structuredContent as unknown as PostBody;
  } finally {
    await client.close();
  }
}

describe('openid-client as an MCP host: discovery, PKCE, a human approving in chromium, code and refresh grants', () => {
  let app: Embedded;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let callbackServer: Server;
  let redirectUri: string;
  /** Every request the callback server received, as full URLs. */
  const callbacks: URL[] = [];

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    await app.auth.humans.register(HUMAN.name, HUMAN.password);
    callbackServer = createServer((req, res) => {
      const url = new URL(req.url ?? '/', redirectUri);
      if (url.pathname !== '/callback') {
        res.writeHead(404).end();
        return;
      }
      callbacks.push(url);
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end('<!doctype html><title>Connected</title><p>Connected. You can close this window.</p>');
    });
    await new Promise<void>((resolve) => callbackServer.listen(0, '127.0.0.1', resolve));
    redirectUri = `http://127.0.0.1:${(callbackServer.address() as { port: number }).port}/callback`;
    browser = await launchChromium();
    context = await browser.newContext();
    page = await context.newPage();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    callbackServer?.closeAllConnections();
    await new Promise((resolve) => callbackServer?.close(resolve));
    await app?.stop();
  });

  it('connects, posts over MCP as the human approved it, and refreshes', async () => {
    const site = app.urls.siteUrl;
    const mcpResource = `${app.urls.apiUrl}/mcp`;

    // RFC 8414 metadata at the issuer's well-known URL names the registration endpoint.
    const metadata = (await (await fetch(`${site}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(metadata).toMatchObject({
      issuer: site,
      authorization_endpoint: `${site}/authorize`,
      token_endpoint: `${app.urls.apiUrl}/oauth/token`,
      registration_endpoint: `${app.urls.apiUrl}/oauth/register`,
      code_challenge_methods_supported: ['S256'],
      authorization_response_iss_parameter_supported: true,
    });

    const registered = await fetch(metadata.registration_endpoint as string, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'OIDC Client Host',
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      }),
    });
    expect(registered.status).toBe(201);
    const { client_id: clientId } = (await registered.json()) as { client_id: string };
    expect(clientId).toMatch(/^cl_/);

    // Discovery from SITE_URL the RFC 8414 way; http only because the test's site is on localhost.
    const config = await oidc.discovery(new URL(site), clientId, { token_endpoint_auth_method: 'none' }, oidc.None(), {
      algorithm: 'oauth2',
      execute: [oidc.allowInsecureRequests],
    });
    expect(config.serverMetadata().issuer).toBe(site);

    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const authorizationUrl = oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: 'posts:write agents:read',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      resource: mcpResource,
    });
    expect(`${authorizationUrl.origin}${authorizationUrl.pathname}`).toBe(`${site}/authorize`);

    // The human: signed out, sent to sign in, then the consent page, then Approve.
    await page.goto(authorizationUrl.href);
    await page.waitForURL(/\/signin\?next=/);
    await page.getByLabel('Name', { exact: true }).fill(HUMAN.name);
    await page.getByLabel('Password', { exact: true }).fill(HUMAN.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/authorize\?/);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Connect OIDC Client Host to the room?');
    expect(await page.getByTestId('unverified').count()).toBe(1);
    // Each scope in plain words, then its name.
    expect(await page.locator('ul.scopes li').allTextContents()).toEqual([expect.stringMatching(/ agents:read$/), expect.stringMatching(/ posts:write$/)]);
    await page.getByLabel("The new agent's name").fill('oidc-host');
    await page.getByRole('button', { name: 'Approve' }).click();
    // The browser follows the 303 to the host's loopback redirect URI (the page's CSP form-action lets it).
    await page.waitForURL((url) => url.href.startsWith(`${redirectUri}?`));
    expect(await page.textContent('body')).toContain('Connected.');
    expect(callbacks).toHaveLength(1);
    const callback = callbacks[0] as URL;
    expect(callback.searchParams.get('iss')).toBe(site);
    expect(callback.searchParams.get('state')).toBe(state);

    // openid-client checks iss (RFC 9207): a response naming another issuer is refused before any token request.
    const forged = new URL(callback.href);
    forged.searchParams.set('iss', 'https://attacker.example');
    const wrongIssuer = await rejection(
      oidc.authorizationCodeGrant(config, forged, { pkceCodeVerifier: verifier, expectedState: state }, { resource: mcpResource }),
    );
    expect(wrongIssuer).toBeInstanceOf(oidc.ClientError);
    expect(((wrongIssuer as Error).cause as Error).message).toMatch(/"iss"/);
    // ... and state.
    const wrongState = await rejection(
      oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: oidc.randomState() }, { resource: mcpResource }),
    );
    expect(((wrongState as Error).cause as Error).message).toMatch(/"state"/);

    // A host's honest mistake at the token endpoint (the API for the resource it authorized with the
    // MCP URL) is refused before the code is spent: the corrected request gets the tokens.
    const wrongResource = await rejection(
      oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state }, { resource: app.urls.apiUrl }),
    );
    expect(wrongResource).toBeInstanceOf(oidc.ResponseBodyError);
    expect(wrongResource).toMatchObject({ error: 'invalid_target', status: 400 });

    const tokens = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state }, { resource: mcpResource });
    expect(tokens.token_type.toLowerCase()).toBe('bearer');
    expect(tokens.access_token).toMatch(/^agt_/);
    expect(tokens.refresh_token).toMatch(/^agr_/);
    expect(tokens.expiresIn()).toBeGreaterThan(3_500);
    expect(tokens.scope).toBe('agents:read posts:write');

    const posted = await postViaMcp(app, tokens.access_token, 'hello from openid-client');
    expect(posted).toMatchObject({ text: 'hello from openid-client', via: 'mcp', humanLabel: HUMAN.name, agentName: 'oidc-host' });
    const listed = (await (await fetch(`${app.urls.baseUrl}/posts?limit=1`)).json()) as { data: PostBody[] };
    expect(listed.data[0]).toEqual(posted);
    // Bound to the MCP endpoint: REST writes refuse it.
    const rest = await post(app, tokens.access_token, { text: 'over REST' });
    expect(rest.status).toBe(401);
    expect(((await rest.json()) as Problem).code).toBe('token_invalid');

    // /account lists the connection.
    await page.goto(`${site}/account`);
    const connection = page.locator('li.agent', { has: page.getByRole('heading', { name: 'oidc-host' }) }).locator('li.grant.connection');
    expect(await connection.filter({ hasText: 'OIDC Client Host' }).textContent()).toContain('connected as oidc-host');

    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token as string);
    expect(refreshed.access_token).toMatch(/^agt_/);
    expect(refreshed.access_token).not.toBe(tokens.access_token);
    expect(refreshed.refresh_token).toMatch(/^agr_/);
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    const again = await postViaMcp(app, refreshed.access_token, 'after a refresh');
    expect(again).toMatchObject({ agentId: posted.agentId, humanLabel: HUMAN.name, via: 'mcp' });

    // The spent refresh token, used again, is invalid_grant, and the connection ends: the newest access token too.
    const reused = await rejection(oidc.refreshTokenGrant(config, tokens.refresh_token as string));
    expect(reused).toBeInstanceOf(oidc.ResponseBodyError);
    expect(reused).toMatchObject({ error: 'invalid_grant', status: 400 });
    // Revocation reaches the edge within a second.
    let refused = await mcpPostStatus(app, refreshed.access_token, 'after the reuse');
    for (const started = Date.now(); refused.status !== 401 && Date.now() - started < 1_000;) {
      await refused.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, 25));
      refused = await mcpPostStatus(app, refreshed.access_token, 'after the reuse');
    }
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as Problem).code).toBe('token_invalid');
  });
});
