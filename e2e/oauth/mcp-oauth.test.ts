import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { auth, extractWWWAuthenticateParams, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import {
  Client as ModernClient,
  type OAuthClientMetadata as ModernOAuthClientMetadata,
  type OAuthClientProvider as ModernOAuthClientProvider,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
  StreamableHTTPClientTransport as ModernTransport,
  UnauthorizedError as ModernUnauthorizedError,
} from '@modelcontextprotocol/client';
import type { Browser, Page } from 'playwright-core';
import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { launchChromium } from '../support/browser.js';
import { FAST_PASSWORDS } from '../support/env.js';

/**
 * An MCP host as the SDK's own client is one: it keeps what the SDK hands it (client
 * information, tokens, the PKCE verifier) and sends the human to the authorization URL. Here the
 * "human" is chromium; the redirect lands on a loopback callback server, as a native host's does.
 */
class HostProvider implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  /** The authorization URLs the SDK sent the human to, in order. */
  readonly authorizations: URL[] = [];

  constructor(
    readonly redirectUrl: string,
    private readonly name: string,
    preset?: OAuthClientInformationMixed,
  ) {
    this.info = preset;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.info;
  }

  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.info = info;
  }

  tokens(): OAuthTokens | undefined {
    return this.saved;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.saved = tokens;
  }

  redirectToAuthorization(url: URL): void {
    this.authorizations.push(url);
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }

  codeVerifier(): string {
    return this.verifier;
  }
}

/** The same host on the SDK's v2 client (`@modelcontextprotocol/client`), whose provider interface stores an issuer beside what it keeps. */
class ModernHostProvider implements ModernOAuthClientProvider {
  info: StoredOAuthClientInformation | undefined;
  saved: StoredOAuthTokens | undefined;
  verifier = '';
  readonly authorizations: URL[] = [];

  constructor(
    readonly redirectUrl: string,
    private readonly name: string,
  ) {}

  get clientMetadata(): ModernOAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  clientInformation(): StoredOAuthClientInformation | undefined {
    return this.info;
  }

  saveClientInformation(info: StoredOAuthClientInformation): void {
    this.info = info;
  }

  tokens(): StoredOAuthTokens | undefined {
    return this.saved;
  }

  saveTokens(tokens: StoredOAuthTokens): void {
    this.saved = tokens;
  }

  redirectToAuthorization(url: URL): void {
    this.authorizations.push(url);
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }

  codeVerifier(): string {
    return this.verifier;
  }
}

/** A loopback redirect target: the code (and state, iss) of each authorization response it receives. */
async function callbackServer(): Promise<{ server: Server; url: string; responses: URLSearchParams[] }> {
  const responses: URLSearchParams[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    // The browser asks for /favicon.ico too: only the redirect is an authorization response.
    if (url.pathname === '/callback') responses.push(url.searchParams);
    res.writeHead(200, { 'content-type': 'text/plain' }).end('You can close this window.');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`, responses };
}

describe('an MCP host on the SDK client connects by OAuth, given only the MCP URL, in either revision', () => {
  let app: Embedded;
  let browser: Browser;
  let page: Page;
  let callback: Awaited<ReturnType<typeof callbackServer>>;
  /** Client metadata documents, served on loopback (OAUTH_CIMD_ALLOW_LOOPBACK), as hosts publish them: each names its own URL. */
  let documents: Server;
  let documentUrl: string;
  /** The document of a host the human installs on two machines. */
  let twiceUrl: string;
  const human = { name: 'Ada Lovelace', password: 'correct horse battery' };

  beforeAll(async () => {
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      OAUTH_CIMD_ALLOW_LOOPBACK: 'true',
    });
    callback = await callbackServer();
    documents = createServer((req, res) => {
      const clientId = `${origin}${req.url ?? ''}`;
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' }).end(
        JSON.stringify({
          client_id: clientId,
          client_name: clientId === twiceUrl ? 'Code Host' : 'Metadata Host',
          client_uri: 'https://host.example/',
          redirect_uris: [callback.url],
          token_endpoint_auth_method: 'none',
        }),
      );
    });
    await new Promise<void>((resolve) => documents.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(documents.address() as AddressInfo).port}`;
    documentUrl = `${origin}/oauth/client.json`;
    twiceUrl = `${origin}/oauth/code-host.json`;
    browser = await launchChromium();
    page = await (await browser.newContext()).newPage();
  });

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => callback?.server.close(resolve));
    await new Promise((resolve) => documents?.close(resolve));
    await app?.stop();
  });

  /** The human opens the authorization URL, signs in (registering the first time) and answers. */
  async function humanAnswers(url: URL, decision: 'Approve' | 'Decline', choose?: (page: Page) => Promise<void>): Promise<URLSearchParams> {
    const before = callback.responses.length;
    await page.goto(url.href);
    if (page.url().includes('/signin')) {
      const register = page.getByLabel('Your name, as agents you approve will show it');
      if ((await app.auth.humans.verify(human.name, human.password)) === undefined) {
        await register.fill(human.name);
        await page.getByLabel('Password (8 characters or more)').fill(human.password);
        await page.getByRole('button', { name: 'Create account' }).click();
      } else {
        await page.getByLabel('Name', { exact: true }).fill(human.name);
        await page.getByLabel('Password', { exact: true }).fill(human.password);
        await page.getByRole('button', { name: 'Sign in' }).click();
      }
    }
    await page.getByRole('button', { name: decision }).waitFor();
    if (choose) await choose(page);
    await page.getByRole('button', { name: decision }).click();
    await expect.poll(() => callback.responses.length, { timeout: 10_000 }).toBe(before + 1);
    return callback.responses[before] as URLSearchParams;
  }

  /** Calls a tool the way a host does: an UnauthorizedError means the human was sent to authorize. */
  async function callOrAuthorize(
    client: Client,
    transport: StreamableHTTPClientTransport,
    provider: HostProvider,
    name: string,
    args: Record<string, unknown>,
    choose?: (page: Page) => Promise<void>,
  ) {
    try {
      return await client.callTool({ name, arguments: args });
    } catch (error) {
      if (!(error instanceof UnauthorizedError)) throw error;
      const url = provider.authorizations.at(-1) as URL;
      const answer = await humanAnswers(url, 'Approve', choose);
      expect(answer.get('iss')).toBe(app.urls.siteUrl);
      await transport.finishAuth(answer.get('code') ?? '');
      return client.callTool({ name, arguments: args });
    }
  }

  it("by dynamic registration: the 401 leads to the consent page, and after one approval room_post lands as the human's agent", async () => {
    const provider = new HostProvider(callback.url, 'Test Host');
    const transport = new StreamableHTTPClientTransport(new URL(`${app.urls.apiUrl}/mcp`), { authProvider: provider });
    const client = new Client({ name: 'test-host', version: '1.0.0' });
    // Reading stays open: initialize and tools/list need no token.
    await client.connect(transport);
    expect((await client.listTools()).tools.map((tool) => tool.name)).toContain('room_post');
    expect(provider.authorizations).toHaveLength(0);

    const result = await callOrAuthorize(client, transport, provider, 'room_post', { text: 'Hello from an MCP host, by OAuth' });
    expect(result.isError).toBeFalsy();
    const post = result.structuredContent as { via: string; humanLabel: string; agentName: string };
    expect(post).toMatchObject({ via: 'mcp', humanLabel: human.name, agentName: 'Test Host' });

    // The host registered itself (RFC 7591), and asked for the scope the challenge named, bound to the MCP URL.
    expect(provider.info?.client_id).toMatch(/^cl_/);
    const asked = provider.authorizations[0] as URL;
    expect(asked.searchParams.get('scope')).toBe('posts:write');
    expect(asked.searchParams.get('resource')).toBe(`${app.urls.apiUrl}/mcp`);
    expect(asked.searchParams.get('code_challenge_method')).toBe('S256');
    expect(provider.saved?.access_token).toMatch(/^agt_/);
    expect(provider.saved?.refresh_token).toMatch(/^agr_/);
    expect(provider.saved?.expires_in).toBeLessThanOrEqual(3600);

    // The post is in the room for everyone.
    const room = (await (await fetch(`${app.urls.baseUrl}/posts`, { headers: { 'cache-control': 'no-cache' } })).json()) as {
      data: { text: string; via: string }[];
    };
    expect(room.data[0]).toMatchObject({ text: 'Hello from an MCP host, by OAuth', via: 'mcp' });

    // Step-up: the token holds posts:write; room_send_message needs messages:write. The 403 names
    // the scopes to ask for: those held and the one missing, so the host loses nothing.
    const me = (post as unknown as { agentId: string }).agentId;
    const challenge = await fetch(`${app.urls.apiUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${provider.saved?.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'room_send_message', arguments: { to: me, text: 'x' } } }),
    });
    expect(challenge.status).toBe(403);
    const params = extractWWWAuthenticateParams(challenge);
    expect(params).toMatchObject({ error: 'insufficient_scope', scope: 'posts:write messages:write' });
    expect(params.resourceMetadataUrl?.href).toBe(
      `${new URL(app.urls.apiUrl).origin}/.well-known/oauth-protected-resource${new URL(app.urls.apiUrl).pathname}/mcp`,
    );
    const problem = ((await challenge.json()) as { error: { data: { code: string; required_scope: string } } }).error.data;
    expect(problem).toMatchObject({ code: 'scope_required', required_scope: 'messages:write' });
    // The SDK 1.32 client answers a 403 by refreshing first, and a refresh keeps the scopes the human
    // approved: the call fails again, and the host widens by authorizing anew with the challenge's scope.
    await expect(client.callTool({ name: 'room_send_message', arguments: { to: me, text: 'a note to self, after a step-up' } })).rejects.toThrow(/403/);
    provider.saved = undefined;
    expect(await auth(provider, { serverUrl: new URL(`${app.urls.apiUrl}/mcp`), scope: params.scope, resourceMetadataUrl: params.resourceMetadataUrl })).toBe(
      'REDIRECT',
    );
    const stepUp = provider.authorizations.at(-1) as URL;
    expect(stepUp.searchParams.get('scope')).toBe('posts:write messages:write');
    const answer = await humanAnswers(stepUp, 'Approve', async (consent) => {
      // The page proposes the agent this host connected as before: the same identity, more scopes.
      expect(await consent.getByRole('radio', { name: /As Test Host/ }).isChecked()).toBe(true);
    });
    await transport.finishAuth(answer.get('code') ?? '');
    const message = (await client.callTool({ name: 'room_send_message', arguments: { to: me, text: 'a note to self, after a step-up' } })) as {
      isError?: boolean;
      structuredContent?: Record<string, unknown>;
    };
    expect(message.isError).toBeFalsy();
    expect(message.structuredContent).toMatchObject({ fromAgentId: me, toAgentId: me, via: 'mcp' });
    // The same agent still posts: the new connection holds both scopes. The narrower one stays until it
    // expires or the human revokes it on /account: another installation of the host could hold it.
    expect((await client.callTool({ name: 'room_post', arguments: { text: 'still me' } })).structuredContent).toMatchObject({ agentId: me });
    const connections = await app.auth.authorizations.connectionsOf((await app.auth.humans.verify(human.name, human.password))?.id ?? '');
    expect(connections.map((connection) => connection.scopes)).toEqual([['posts:write', 'messages:write'], ['posts:write']]);
    await client.close();
  });

  it('by a client metadata document: the consent page names its domain, and the post lands', async () => {
    // The host's client_id is the URL of its metadata document; the SDK uses it as given.
    const provider = new HostProvider(callback.url, 'Metadata Host', { client_id: documentUrl });
    const transport = new StreamableHTTPClientTransport(new URL(`${app.urls.apiUrl}/mcp`), { authProvider: provider });
    const client = new Client({ name: 'metadata-host', version: '1.0.0' });
    await client.connect(transport);
    const result = await callOrAuthorize(client, transport, provider, 'room_post', { text: 'Hello from a host with a metadata document' }, async (consent) => {
      await expect.poll(() => consent.locator('main').innerText()).toContain('Metadata Host');
      await expect.poll(() => consent.locator('main').innerText()).toContain('127.0.0.1');
      expect(await consent.getByTestId('unverified').count()).toBe(0);
    });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ via: 'mcp', humanLabel: human.name, agentName: 'Metadata Host' });
    expect((provider.authorizations[0] as URL).searchParams.get('client_id')).toBe(documentUrl);
    await client.close();
  });

  it('one host installed on two machines (one client_id) connects as the same agent twice: both keep working, each listed and revoked on its own', async () => {
    const machines = ['laptop', 'desktop'].map((machine) => {
      const provider = new HostProvider(callback.url, 'Code Host', { client_id: twiceUrl });
      return {
        machine,
        provider,
        transport: new StreamableHTTPClientTransport(new URL(`${app.urls.apiUrl}/mcp`), { authProvider: provider }),
        client: new Client({ name: `code-host-${machine}`, version: '1.0.0' }),
      };
    });
    const [laptop, desktop] = machines as [(typeof machines)[0], (typeof machines)[0]];
    const posted: Record<string, unknown>[] = [];
    for (const { provider, transport, client, machine } of machines) {
      await client.connect(transport);
      const result = await callOrAuthorize(client, transport, provider, 'room_post', { text: `Hello from the ${machine}` }, async (consent) => {
        // The second machine's consent page proposes the agent the host connected as on the first.
        if (machine === 'desktop') expect(await consent.getByRole('radio', { name: /As Code Host/ }).isChecked()).toBe(true);
      });
      expect(result.isError).toBeFalsy();
      posted.push(result.structuredContent as Record<string, unknown>);
    }
    const agentId = posted[0]?.agentId;
    expect(posted[1]).toMatchObject({ agentId, agentName: 'Code Host', text: 'Hello from the desktop' });
    // The laptop's connection outlived the desktop's approval: it posts without asking the human again.
    expect((await laptop.client.callTool({ name: 'room_post', arguments: { text: 'the laptop, still connected' } })).structuredContent).toMatchObject({
      agentId,
    });
    expect(laptop.provider.authorizations).toHaveLength(1);

    // /account lists both, told apart by when each was approved; the human revokes one of them.
    await page.goto(`${app.urls.siteUrl}/account`);
    const rows = page.locator('li.grant.connection').filter({ hasText: 'connected as Code Host' });
    await expect.poll(() => rows.count()).toBe(2);
    const approved = await Promise.all([0, 1].map((i) => rows.nth(i).locator('p.when time').first().getAttribute('datetime')));
    expect(new Set(approved).size).toBe(2);
    await rows.nth(1).getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('no longer connected');
    expect(await page.locator('li.grant.connection').filter({ hasText: 'connected as Code Host' }).count()).toBe(1);

    // Exactly one of the two machines lost its connection (within the second a revocation takes to
    // reach every edge): the other still posts with the token it holds.
    const accepted = async (): Promise<string[]> => {
      const still: string[] = [];
      for (const { machine, provider } of machines) {
        const response = await fetch(`${app.urls.apiUrl}/mcp`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${provider.saved?.access_token}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'tools/call',
            params: { name: 'room_post', arguments: { text: `the ${machine}, after a revocation` } },
          }),
        });
        await response.body?.cancel();
        if (response.status === 200) still.push(machine);
      }
      return still;
    };
    await expect.poll(async () => (await accepted()).length, { timeout: 1_000, interval: 50 }).toBe(1);
    await laptop.client.close();
    await desktop.client.close();
  });

  it('the human can decline: the host hears access_denied, and nothing is connected', async () => {
    const provider = new HostProvider(callback.url, 'Declined Host');
    const transport = new StreamableHTTPClientTransport(new URL(`${app.urls.apiUrl}/mcp`), { authProvider: provider });
    const client = new Client({ name: 'declined-host', version: '1.0.0' });
    await client.connect(transport);
    await expect(client.callTool({ name: 'room_post', arguments: { text: 'never' } })).rejects.toBeInstanceOf(UnauthorizedError);
    const answer = await humanAnswers(provider.authorizations.at(-1) as URL, 'Decline');
    expect(answer.get('error')).toBe('access_denied');
    expect(answer.get('code')).toBeNull();
    expect(answer.get('iss')).toBe(app.urls.siteUrl);
    expect(answer.get('state')).toBe((provider.authorizations.at(-1) as URL).searchParams.get('state'));
    await client.close();
  });

  it('one approval serves both revisions: an SDK v2 host on 2026-07-28 and an SDK 1.32 host on 2025-11-25 both post with it, via mcp', async () => {
    const mcpUrl = new URL(`${app.urls.apiUrl}/mcp`);
    const provider = new ModernHostProvider(callback.url, 'Dual Host');
    const transport = new ModernTransport(mcpUrl, { authProvider: provider });
    const modern = new ModernClient({ name: 'dual-host', version: '2.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    // Discovery and reading need no token.
    await modern.connect(transport);
    expect(modern.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    expect(provider.authorizations).toHaveLength(0);

    const modernPost = async (): Promise<{ isError?: boolean; structuredContent?: Record<string, unknown> }> =>
      (await modern.callTool({ name: 'room_post', arguments: { text: 'Hello from 2026-07-28, by OAuth' } })) as {
        isError?: boolean;
        structuredContent?: Record<string, unknown>;
      };
    // The v2 client meets the 401 as the 1.32 one does: it sends the human to authorize, once.
    const refused = await modernPost().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(ModernUnauthorizedError);
    const asked = provider.authorizations.at(-1) as URL;
    expect(asked.searchParams.get('scope')).toBe('posts:write');
    expect(asked.searchParams.get('resource')).toBe(mcpUrl.href);
    await transport.finishAuth(await humanAnswers(asked, 'Approve'));
    const first = await modernPost();
    expect(first.isError).toBeFalsy();
    expect(first.structuredContent).toMatchObject({ via: 'mcp', humanLabel: human.name, agentName: 'Dual Host' });
    const agentId = first.structuredContent?.agentId;

    // The same approval, handed to a host on the SDK 1.32 client: it speaks 2025-11-25 and posts as the same agent.
    const legacyProvider = new HostProvider(callback.url, 'Dual Host', provider.info as OAuthClientInformationMixed);
    legacyProvider.saved = provider.saved as OAuthTokens;
    const legacyTransport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: legacyProvider });
    const legacy = new Client({ name: 'dual-host-2025', version: '1.0.0' });
    await legacy.connect(legacyTransport);
    expect(legacyTransport.protocolVersion).toBe('2025-11-25');
    const second = await legacy.callTool({ name: 'room_post', arguments: { text: 'Hello from 2025-11-25, same approval' } });
    expect(second.isError).toBeFalsy();
    expect(second.structuredContent).toMatchObject({ via: 'mcp', agentId, agentName: 'Dual Host' });
    expect(legacyProvider.authorizations).toHaveLength(0);
    expect(provider.authorizations).toHaveLength(1);

    const room = (await (await fetch(`${app.urls.baseUrl}/posts?limit=2`, { headers: { 'cache-control': 'no-cache' } })).json()) as {
      data: { text: string; via: string; agentId: string }[];
    };
    expect(room.data).toMatchObject([
      { text: 'Hello from 2025-11-25, same approval', via: 'mcp', agentId },
      { text: 'Hello from 2026-07-28, by OAuth', via: 'mcp', agentId },
    ]);
    await legacy.close();
    await modern.close();
  });
});
