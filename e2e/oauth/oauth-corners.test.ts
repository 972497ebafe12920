import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import { HOST_CONNECTIONS_MAX } from '@agentroom/kit/domain';
import { freePort } from '@agentroom/kit/local';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { post, type Problem } from '../support/agent.js';
import { MovableClock } from '../support/clock.js';
import { callTool, mcpClient } from '../support/mcp.js';

/**
 * The corners of the authorization code flow, with plain fetch as the MCP host and as the human's
 * browser (a cookie-carrying sign-in, the consent form posted by hand). Redirects are never followed:
 * the tests read the Location a browser would go to, so the registered redirect URI needs no server.
 */

const HUMAN = { name: 'Grace Hopper', password: 'cobol-compiler-1959' };
/** A loopback redirect URI (RFC 8252); nothing listens there, nothing is sent there. */
const REDIRECT = 'http://127.0.0.1:8976/callback';
/** A state with characters that need encoding, so "echoed" means echoed exactly. */
const STATE = 'st@te/with spaces&=?#é';

interface IssuedTokens {
  access_token: string;
  token_type: string;
  expires_in: number;
  scope: string;
  refresh_token: string;
  agent_id: string;
}

interface OAuthErrorBody {
  error: string;
  error_description: string;
}

interface TokenAnswer {
  status: number;
  body: Partial<IssuedTokens> & Partial<OAuthErrorBody>;
}

type Query = Record<string, string | undefined>;

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

function cookieOf(response: Response, name: string): string | undefined {
  const cookie = response.headers.getSetCookie().find((c) => c.startsWith(`${name}=`));
  return cookie === undefined ? undefined : decodeURIComponent(cookie.split(';')[0]?.slice(name.length + 1) ?? '');
}

/** The value of a hidden (or any) input of a page, by name. */
function inputValue(html: string, name: string): string {
  const value = new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1];
  if (value === undefined) throw new Error(`no input named ${name} in the page: ${html.slice(0, 400)}`);
  return value;
}

/** Signs in through the real form: the form cookie and its CSRF token from the GET, the session cookie from the POST. */
async function signIn(app: Embedded, human: { name: string; password: string }): Promise<string> {
  const site = app.urls.siteUrl;
  const form = await fetch(`${site}/signin`);
  const csrf = inputValue(await form.text(), 'csrf');
  const response = await fetch(`${site}/signin`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `ar_form=${encodeURIComponent(cookieOf(form, 'ar_form') ?? '')}` },
    body: new URLSearchParams({ csrf, name: human.name, password: human.password, next: '/account', action: 'signin' }).toString(),
  });
  expect(response.status).toBe(303);
  const session = cookieOf(response, 'ar_session');
  if (session === undefined) throw new Error('sign-in set no session cookie');
  return `ar_session=${encodeURIComponent(session)}`;
}

async function register(app: Embedded, metadata: Record<string, unknown>): Promise<Response> {
  return fetch(`${app.urls.apiUrl}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(metadata) });
}

function authorizeUrl(app: Embedded, query: Query): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) params.set(name, value);
  return `${app.urls.siteUrl}/authorize?${params.toString()}`;
}

/** GET /authorize as the browser would send it, without following where it answers. */
function authorize(app: Embedded, query: Query, cookie?: string): Promise<Response> {
  return fetch(authorizeUrl(app, query), { redirect: 'manual', headers: cookie === undefined ? {} : { cookie } });
}

async function tokenRequest(app: Embedded, fields: Record<string, string>): Promise<TokenAnswer> {
  const response = await fetch(`${app.urls.apiUrl}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: response.status, body: (await response.json()) as TokenAnswer['body'] };
}

/** A JSON-RPC tools/call of room_post straight to the MCP endpoint: the HTTP status says whether the token was taken. */
function mcpPost(app: Embedded, token: string, text: string): Promise<Response> {
  return fetch(`${app.urls.apiUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'room_post', arguments: { text } } }),
  });
}

/** Posts through the MCP SDK's own client; answers the created post. */
async function postViaMcp(app: Embedded, token: string, text: string): Promise<Record<string, unknown>> {
  const client = await mcpClient(app, token);
  try {
    const result = await callTool(client, 'room_post', { text });
    expect(result.isError, JSON.stringify(result).slice(0, 300)).not.toBe(true);
    expect(result.structuredContent).toMatchObject({ text, via: 'mcp' });
    return result.structuredContent ?? {};
  } finally {
    await client.close();
  }
}

/**
 * Calls room_post over MCP until the token is refused with 401, for at most `withinMs`; answers the
 * last status, the problem's code and how long it took. A token refused at once takes one call.
 */
async function refusal(app: Embedded, token: string, withinMs: number): Promise<{ status: number; code: string | undefined; ms: number }> {
  const started = Date.now();
  for (;;) {
    const response = await mcpPost(app, token, 'am I still connected?');
    const ms = Date.now() - started;
    if (response.status === 401) return { status: 401, code: ((await response.json()) as { code?: string }).code, ms };
    await response.body?.cancel();
    if (ms > withinMs) return { status: response.status, code: undefined, ms };
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** What every authorization response must be: at the registered redirect URI, with `iss` (RFC 9207) and the state as sent. */
function expectAuthorizationResponse(app: Embedded, response: Response, state: string | null = STATE): URL {
  expect(response.status).toBe(303);
  const location = new URL(response.headers.get('location') ?? 'missing:');
  expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
  expect(location.searchParams.get('iss')).toBe(app.urls.siteUrl);
  expect(location.searchParams.get('state')).toBe(state);
  return location;
}

/** A refusal the authorization endpoint may not send anywhere: a 400 page for the human that says `why`, no redirect. */
async function expectRefusalPage(response: Response, why: RegExp): Promise<string> {
  expect(response.status).toBe(400);
  expect(response.headers.get('location')).toBeNull();
  expect(response.headers.get('content-type')).toMatch(/^text\/html/);
  const html = await response.text();
  expect(html).toContain('This connection cannot go on');
  expect(/role="alert">([^<]*)</.exec(html)?.[1]).toMatch(why);
  return html;
}

describe('OAuth authorization code flow: the corners, with fetch as the host and the browser', () => {
  let app: Embedded;
  let site: string;
  let cookie: string;
  let clientId: string;
  let agents = 0;
  /** The product's clock: the code-expiry test moves it instead of sleeping a minute. */
  const clock = new MovableClock();

  /** A valid authorization request of the registered client, with `overrides`. */
  function request(challenge: string, overrides: Query = {}): Query {
    return {
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: STATE,
      ...overrides,
    };
  }

  /**
   * Signed in, the human reads the consent page of `query` and answers it, as a new agent or as the
   * agent `agent` names; answers the 303 of the answer.
   */
  async function answer(
    query: Query,
    decision: 'approve' | 'decline',
    agentName?: string,
    agent = 'new',
  ): Promise<{ response: Response; page: Response; html: string }> {
    const page = await authorize(app, query, cookie);
    expect(page.status).toBe(200);
    const html = await page.clone().text();
    const response = await fetch(`${site}/authorize`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      body: new URLSearchParams({
        csrf: inputValue(html, 'csrf'),
        request: inputValue(html, 'request'),
        agent,
        agent_name: agentName ?? `corner-${(agents += 1)}`,
        decision,
      }).toString(),
    });
    return { response, page, html };
  }

  /** Approves a request (as a new agent, or as the agent `agent` names) and answers the code with its verifier. */
  async function approved(overrides: Query = {}, agentName?: string, agent?: string): Promise<{ code: string; verifier: string; clientId: string }> {
    const { verifier, challenge } = pkce();
    const { response } = await answer(request(challenge, overrides), 'approve', agentName, agent);
    const location = expectAuthorizationResponse(app, response, overrides.state ?? STATE);
    const code = location.searchParams.get('code');
    expect(code).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(location.searchParams.get('error')).toBeNull();
    return { code: code ?? '', verifier, clientId: overrides.client_id ?? clientId };
  }

  function exchange(grant: { code: string; verifier: string; clientId: string }, extra: Record<string, string> = {}): Promise<TokenAnswer> {
    return tokenRequest(app, {
      grant_type: 'authorization_code',
      code: grant.code,
      code_verifier: grant.verifier,
      client_id: grant.clientId,
      redirect_uri: REDIRECT,
      ...extra,
    });
  }

  /** A whole connection: approved, exchanged; answers the tokens. */
  async function connected(overrides: Query = {}, extra: Record<string, string> = {}, agentName?: string, agent?: string): Promise<IssuedTokens> {
    const answered = await exchange(await approved(overrides, agentName, agent), extra);
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    return answered.body as IssuedTokens;
  }

  function refresh(refreshToken: string, client = clientId): Promise<TokenAnswer> {
    return tokenRequest(app, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client });
  }

  function expectOAuthError(answered: TokenAnswer, status: number, error: string): void {
    expect(answered, JSON.stringify(answered.body)).toMatchObject({ status, body: { error } });
    expect(answered.body.error_description).toMatch(/\w/);
    expect(answered.body.access_token).toBeUndefined();
  }

  beforeAll(async () => {
    app = await startEmbedded(
      { ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000', OAUTH_CIMD_ALLOW_LOOPBACK: 'true' },
      undefined,
      { clock },
    );
    site = app.urls.siteUrl;
    await app.auth.humans.register(HUMAN.name, HUMAN.password);
    cookie = await signIn(app, HUMAN);
    const registered = await register(app, { redirect_uris: [REDIRECT], client_name: 'Corner Host', token_endpoint_auth_method: 'none' });
    expect(registered.status).toBe(201);
    clientId = ((await registered.json()) as { client_id: string }).client_id;
    expect(clientId).toMatch(/^cl_/);
  });

  afterAll(async () => {
    await app.stop();
  });

  describe('the authorization endpoint', () => {
    it('sends a signed-out human to sign in first, with the request as `next`', async () => {
      const response = await authorize(app, request(pkce().challenge));
      expect(response.status).toBe(303);
      const location = new URL(response.headers.get('location') ?? '', site);
      expect(`${location.origin}${location.pathname}`).toBe(`${site}/signin`);
      const next = location.searchParams.get('next') ?? '';
      expect(next.startsWith('/authorize?')).toBe(true);
      expect(new URL(next, site).searchParams.get('client_id')).toBe(clientId);
    });

    it('refuses a request without code_challenge at the redirect URI: invalid_request, with state and iss', async () => {
      const location = expectAuthorizationResponse(
        app,
        await authorize(app, request('', { code_challenge: undefined, code_challenge_method: undefined }), cookie),
      );
      expect(location.searchParams.get('error')).toBe('invalid_request');
      expect(location.searchParams.get('error_description')).toMatch(/PKCE|code_challenge/);
      expect(location.searchParams.get('code')).toBeNull();
    });

    it('refuses code_challenge_method=plain, and a missing method, at the redirect URI', async () => {
      const { verifier } = pkce();
      for (const method of ['plain', undefined]) {
        const location = expectAuthorizationResponse(app, await authorize(app, request(verifier, { code_challenge_method: method }), cookie));
        expect(location.searchParams.get('error'), `code_challenge_method=${method}`).toBe('invalid_request');
        expect(location.searchParams.get('code')).toBeNull();
      }
    });

    it('refuses an unregistered redirect_uri on a 400 page, never redirecting to it', async () => {
      for (const redirect of ['https://attacker.example/callback', 'http://127.0.0.1:8976/other', `${REDIRECT}?extra=1`]) {
        const html = await expectRefusalPage(
          await authorize(app, request(pkce().challenge, { redirect_uri: redirect }), cookie),
          /redirect_uri is not one the client registered/,
        );
        expect(html).not.toContain('attacker.example/callback?');
      }
    });

    it('refuses an unknown client_id on a 400 page, even with an error the client would otherwise hear by redirect', async () => {
      await expectRefusalPage(await authorize(app, request(pkce().challenge, { client_id: 'cl_nobodyRegisteredThis000' }), cookie), /No client is registered/);
      await expectRefusalPage(
        await authorize(app, request('', { client_id: 'cl_nobodyRegisteredThis000', code_challenge: undefined })),
        /No client is registered/,
      );
      await expectRefusalPage(await authorize(app, request(pkce().challenge, { client_id: undefined }), cookie), /client_id is missing/);
    });

    it('refuses a parameter sent twice on a 400 page (RFC 6749 §3.1), never redirecting', async () => {
      const url = `${authorizeUrl(app, request(pkce().challenge))}&redirect_uri=${encodeURIComponent('https://attacker.example/callback')}`;
      await expectRefusalPage(await fetch(url, { redirect: 'manual', headers: { cookie } }), /redirect_uri is sent more than once/);
    });

    it('refuses a foreign resource at the redirect URI with invalid_target', async () => {
      for (const resource of ['https://elsewhere.example/mcp', `${app.urls.apiUrl}/v1`, `${site}/mcp`]) {
        const location = expectAuthorizationResponse(app, await authorize(app, request(pkce().challenge, { resource }), cookie));
        expect(location.searchParams.get('error'), resource).toBe('invalid_target');
        expect(location.searchParams.get('code')).toBeNull();
      }
    });

    it('shows a consent page whose form may go back to the host (CSP form-action), and approving answers code, state and iss', async () => {
      const { verifier, challenge } = pkce();
      const { response, page, html } = await answer(request(challenge), 'approve');
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
      expect(page.headers.get('content-security-policy')).toMatch(/form-action 'self' http:\/\/127\.0\.0\.1:8976(;|\s|$)/);
      expect(html).toContain('Corner Host');
      expect(html).toContain('data-testid="unverified"');
      const location = expectAuthorizationResponse(app, response);
      expect(location.searchParams.get('code')).toMatch(/./);
      expect((await exchange({ code: location.searchParams.get('code') ?? '', verifier, clientId })).status).toBe(200);
    });

    it('takes one answer per consent page: a second POST of the same form (a double click, a second tab) is refused on a page', async () => {
      const { response, html } = await answer(request(pkce().challenge), 'approve');
      expectAuthorizationResponse(app, response);
      for (const decision of ['approve', 'decline']) {
        const again = await fetch(`${site}/authorize`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
          body: new URLSearchParams({
            csrf: inputValue(html, 'csrf'),
            request: inputValue(html, 'request'),
            agent: 'new',
            agent_name: 'twice',
            decision,
          }).toString(),
        });
        expect(again.status, decision).toBeGreaterThanOrEqual(400);
        expect(again.headers.get('location'), decision).toBeNull();
        expect(await again.text()).toContain('already answered');
      }
    });

    it("offers an operator's many agents as their newest 50, says how many there are, and connects as an older one by its id", async () => {
      const fleet: { agentId: string }[] = [];
      for (let i = 1; i <= 60; i += 1) {
        fleet.push(await app.auth.flows.provision({ humanName: HUMAN.name, agentName: `fleet-${i}`, scopes: ['posts:write'], reason: 'k6 load test' }));
        clock.advance(1);
      }
      const { verifier, challenge } = pkce();
      const html = await (await authorize(app, request(challenge), cookie)).text();
      const offered = [...html.matchAll(/name="agent" value="(a_[^"]+)"/g)].map((match) => match[1]);
      expect(fleet.slice(10).every((agent) => offered.includes(agent.agentId))).toBe(true);
      expect(fleet.slice(0, 10).some((agent) => offered.includes(agent.agentId))).toBe(false);
      expect(html).toContain('Of the 60 agents an operator provisioned in your name, the newest 50 are listed');
      const oldest = fleet[0]?.agentId ?? '';
      const response = await fetch(`${site}/authorize`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
        body: new URLSearchParams({
          csrf: inputValue(html, 'csrf'),
          request: inputValue(html, 'request'),
          agent: oldest,
          agent_name: '',
          decision: 'approve',
        }).toString(),
      });
      const code = expectAuthorizationResponse(app, response).searchParams.get('code') ?? '';
      const answered = await exchange({ code, verifier, clientId });
      expect(answered.status, JSON.stringify(answered.body)).toBe(200);
      expect(answered.body.agent_id).toBe(oldest);
    });

    it('answers a decline with access_denied, the state and iss, and no code', async () => {
      const { response } = await answer(request(pkce().challenge), 'decline');
      const location = expectAuthorizationResponse(app, response);
      expect(location.searchParams.get('error')).toBe('access_denied');
      expect(location.searchParams.get('code')).toBeNull();
    });

    it('leaves state out when the client sent none, and still names the issuer', async () => {
      const { response } = await answer(request(pkce().challenge, { state: undefined }), 'decline');
      const location = expectAuthorizationResponse(app, response, null);
      expect(location.searchParams.has('state')).toBe(false);
    });
  });

  describe('the token endpoint', () => {
    it('exchanges a code for a bearer access token (agt_), a refresh token (agr_), an hour, the scopes and the agent', async () => {
      const tokens = await connected({ scope: 'posts:write messages:read' });
      expect(tokens).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'posts:write messages:read' });
      expect(tokens.access_token).toMatch(/^agt_/);
      expect(tokens.refresh_token).toMatch(/^agr_/);
      expect(tokens.agent_id).toMatch(/^a_/);
      const created = await postViaMcp(app, tokens.access_token, 'connected by the code flow');
      expect(created).toMatchObject({ agentId: tokens.agent_id, humanLabel: HUMAN.name });
    });

    it('checks client, redirect_uri, verifier and resource before spending a code: each refusal leaves it good for the corrected request', async () => {
      const grant = await approved({ resource: `${app.urls.apiUrl}/mcp` });
      const other = await register(app, { redirect_uris: [REDIRECT], client_name: 'Another Host' });
      const otherId = ((await other.json()) as { client_id: string }).client_id;
      // A host's honest mistakes, and a bystander who saw the code without its verifier: none spends it.
      expectOAuthError(await exchange({ ...grant, verifier: pkce().verifier }), 400, 'invalid_grant');
      expectOAuthError(await exchange({ ...grant, clientId: otherId }), 400, 'invalid_grant');
      expectOAuthError(await exchange(grant, { redirect_uri: 'http://127.0.0.1:8976/elsewhere' }), 400, 'invalid_grant');
      expectOAuthError(
        await tokenRequest(app, { grant_type: 'authorization_code', code: grant.code, code_verifier: grant.verifier, client_id: clientId }),
        400,
        'invalid_request',
      );
      expectOAuthError(await exchange(grant, { resource: 'https://elsewhere.example/mcp' }), 400, 'invalid_target');
      expectOAuthError(await exchange(grant, { resource: app.urls.apiUrl }), 400, 'invalid_target');
      const answered = await exchange(grant, { resource: `${app.urls.apiUrl}/mcp` });
      expect(answered.status, JSON.stringify(answered.body)).toBe(200);
      await postViaMcp(app, (answered.body as IssuedTokens).access_token, 'after five refused exchanges of the same code');
    });

    it('refuses a spent code sent without its verifier or by another client, revoking nothing; sent again whole, it is a replay and the connection ends', async () => {
      const grant = await approved();
      const first = await exchange(grant);
      expect(first.status).toBe(200);
      const tokens = first.body as IssuedTokens;
      const other = await register(app, { redirect_uris: [REDIRECT], client_name: 'Another Host' });
      const otherId = ((await other.json()) as { client_id: string }).client_id;
      // Whoever saw the code in a log or a browser's history cannot end the host's connection with it.
      expectOAuthError(await exchange({ ...grant, verifier: pkce().verifier }), 400, 'invalid_grant');
      expectOAuthError(await exchange({ ...grant, clientId: otherId }), 400, 'invalid_grant');
      await postViaMcp(app, tokens.access_token, 'still connected after two bad replays');
      // The code with its verifier, again: what the first exchange gave is withdrawn.
      const replay = await exchange(grant);
      expectOAuthError(replay, 400, 'invalid_grant');
      expect(replay.body.error_description).toMatch(/used already/);
      expect(await refusal(app, tokens.access_token, 1_000)).toMatchObject({ status: 401, code: 'token_invalid' });
      expectOAuthError(await refresh(tokens.refresh_token), 400, 'invalid_grant');
    });

    it('takes two exchanges of one code at once for a replay: at most one answers tokens, and they are revoked', async () => {
      const grant = await approved();
      const answers = await Promise.all([exchange(grant), exchange(grant)]);
      const issued = answers.filter((answered) => answered.status === 200);
      expect(issued.length).toBeLessThanOrEqual(1);
      for (const refused of answers.filter((answered) => answered.status !== 200)) expectOAuthError(refused, 400, 'invalid_grant');
      // The winner's tokens may have been revoked before they were answered: then both were refused.
      for (const answered of issued)
        expect(await refusal(app, (answered.body as IssuedTokens).access_token, 1_000)).toMatchObject({ status: 401, code: 'token_invalid' });
    });

    it("requires redirect_uri when the authorization request named it (RFC 6749 §4.1.3), and not when the client's one registered URI stood in for it", async () => {
      const named = await approved();
      const without = (grant: { code: string; verifier: string; clientId: string }): Promise<TokenAnswer> =>
        tokenRequest(app, { grant_type: 'authorization_code', code: grant.code, code_verifier: grant.verifier, client_id: grant.clientId });
      const refused = await without(named);
      expectOAuthError(refused, 400, 'invalid_request');
      expect(refused.body.error_description).toMatch(/redirect_uri is missing/);
      expect((await exchange(named)).status).toBe(200);
      // Left out of the authorization request: the client registered REDIRECT alone, and the code went there.
      const unnamed = await approved({ redirect_uri: undefined });
      const answered = await without(unnamed);
      expect(answered.status, JSON.stringify(answered.body)).toBe(200);
      await postViaMcp(app, (answered.body as IssuedTokens).access_token, 'exchanged without redirect_uri, as it was authorized');
    });

    it('refuses a code older than 60 seconds with invalid_grant', async () => {
      const grant = await approved();
      clock.advance(61_000);
      const answered = await exchange(grant);
      expectOAuthError(answered, 400, 'invalid_grant');
      expect(answered.body.error_description).toMatch(/expired/);
    });

    it('refuses a missing code_verifier as invalid_request', async () => {
      const grant = await approved();
      const answered = await tokenRequest(app, { grant_type: 'authorization_code', code: grant.code, client_id: clientId, redirect_uri: REDIRECT });
      expectOAuthError(answered, 400, 'invalid_request');
    });

    it('refuses a replayed code with invalid_grant, and revokes what the first exchange gave: its access token gets 401 on MCP', async () => {
      const grant = await approved();
      const first = await exchange(grant);
      expect(first.status).toBe(200);
      const tokens = first.body as IssuedTokens;
      const before = await mcpPost(app, tokens.access_token, 'before the replay');
      expect(before.status).toBe(200);
      await before.body?.cancel();
      expectOAuthError(await exchange(grant), 400, 'invalid_grant');
      const refused = await refusal(app, tokens.access_token, 1_000);
      expect(refused).toMatchObject({ status: 401, code: 'token_invalid' });
      expectOAuthError(await refresh(tokens.refresh_token), 400, 'invalid_grant');
    });

    it('refuses a code at another redirect_uri or for another client with invalid_grant', async () => {
      expectOAuthError(await exchange(await approved(), { redirect_uri: 'http://127.0.0.1:8976/elsewhere' }), 400, 'invalid_grant');
      const other = await register(app, { redirect_uris: [REDIRECT], client_name: 'Another Host' });
      const otherId = ((await other.json()) as { client_id: string }).client_id;
      expectOAuthError(await exchange({ ...(await approved()), clientId: otherId }), 400, 'invalid_grant');
    });

    it('refuses a foreign resource at the token endpoint with invalid_target', async () => {
      expectOAuthError(await exchange(await approved(), { resource: 'https://elsewhere.example/mcp' }), 400, 'invalid_target');
      // Bound at authorization, the token may not be asked for another of our resources either.
      expectOAuthError(await exchange(await approved({ resource: `${app.urls.apiUrl}/mcp` }), { resource: app.urls.apiUrl }), 400, 'invalid_target');
    });

    it('rotates refresh tokens: each works once; the old one used again is invalid_grant and ends the connection, newest access token included', async () => {
      const first = await connected();
      const second = await refresh(first.refresh_token);
      expect(second.status, JSON.stringify(second.body)).toBe(200);
      const secondTokens = second.body as IssuedTokens;
      expect(secondTokens.refresh_token).toMatch(/^agr_/);
      expect(secondTokens.refresh_token).not.toBe(first.refresh_token);
      expect(secondTokens.access_token).not.toBe(first.access_token);
      expect(secondTokens).toMatchObject({ token_type: 'Bearer', expires_in: 3600, agent_id: first.agent_id, scope: first.scope });
      // The new refresh token works once.
      const third = await refresh(secondTokens.refresh_token);
      expect(third.status, JSON.stringify(third.body)).toBe(200);
      const newest = third.body as IssuedTokens;
      await postViaMcp(app, newest.access_token, 'on the newest access token');
      expectOAuthError(await refresh(first.refresh_token), 400, 'invalid_grant');
      expect(await refusal(app, newest.access_token, 1_000)).toMatchObject({ status: 401, code: 'token_invalid' });
      expectOAuthError(await refresh(newest.refresh_token), 400, 'invalid_grant');
    });

    it('refuses a refresh for another resource with invalid_target, and the refresh token stays good for a correct retry', async () => {
      const tokens = await connected({ resource: `${app.urls.apiUrl}/mcp` });
      const wrong = await tokenRequest(app, {
        grant_type: 'refresh_token',
        refresh_token: tokens.refresh_token,
        client_id: clientId,
        resource: app.urls.apiUrl,
      });
      expectOAuthError(wrong, 400, 'invalid_target');
      // Nothing was issued, so nothing was rotated: the client's refresh token is still its newest (RFC 6749 §6, §5.2).
      const retried = await tokenRequest(app, {
        grant_type: 'refresh_token',
        refresh_token: tokens.refresh_token,
        client_id: clientId,
        resource: `${app.urls.apiUrl}/mcp`,
      });
      expect(retried.status, JSON.stringify(retried.body)).toBe(200);
      await postViaMcp(app, (retried.body as IssuedTokens).access_token, 'after a refused refresh and a good one');
    });

    it('refuses a refresh token of another client, an unknown grant type and a malformed refresh token', async () => {
      const tokens = await connected();
      const other = await register(app, { redirect_uris: [REDIRECT] });
      const otherId = ((await other.json()) as { client_id: string }).client_id;
      expectOAuthError(await refresh(tokens.refresh_token, otherId), 400, 'invalid_grant');
      expectOAuthError(await refresh('agr_notarealtoken'), 400, 'invalid_grant');
      expectOAuthError(await tokenRequest(app, { grant_type: 'password', username: 'x', password: 'y' }), 400, 'unsupported_grant_type');
    });
  });

  describe('resources (RFC 8707)', () => {
    it('binds a token to {api_url}/mcp: refused on REST writes with 401 token_invalid, accepted by MCP', async () => {
      const tokens = await connected({ resource: `${app.urls.apiUrl}/mcp` }, { resource: `${app.urls.apiUrl}/mcp` });
      const refused = await post(app, tokens.access_token, { text: 'REST with an MCP-bound token' });
      expect(refused.status).toBe(401);
      expect(((await refused.json()) as Problem).code).toBe('token_invalid');
      await postViaMcp(app, tokens.access_token, 'MCP with an MCP-bound token');
      // A refreshed token keeps the binding.
      const refreshed = (await refresh(tokens.refresh_token)).body as IssuedTokens;
      expect((await post(app, refreshed.access_token, { text: 'still REST' })).status).toBe(401);
    });

    it('lets a token bound to the whole API {api_url} write over REST too', async () => {
      const tokens = await connected({ resource: app.urls.apiUrl });
      expect((await post(app, tokens.access_token, { text: 'REST with an API-bound token' })).status).toBe(201);
      await postViaMcp(app, tokens.access_token, 'MCP with an API-bound token');
    });
  });

  describe('revoking on /account', () => {
    it('asks first, then revokes: the access token is refused within a second and the refresh token is invalid_grant', async () => {
      const tokens = await connected({}, {}, 'revoke-me');
      const account = await (await fetch(`${site}/account`, { headers: { cookie } })).text();
      // Each connection is listed under its agent, with its own revoke form.
      const row = account.split('<li class="grant connection">').find((r) => r.includes('connected as revoke-me'));
      expect(row, 'a connection of the list names the agent').toBeDefined();
      const connectionId = inputValue(row ?? '', 'connection_id');
      const csrf = inputValue(account, 'csrf');
      const revoke = (fields: Record<string, string>): Promise<Response> =>
        fetch(`${site}/account/revoke`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
          body: new URLSearchParams({ csrf, ...fields }).toString(),
        });

      const question = await revoke({ connection_id: connectionId });
      expect(question.status).toBe(200);
      expect(await question.text()).toContain('Revoke Corner Host?');
      // Asking revoked nothing.
      await postViaMcp(app, tokens.access_token, 'asked, not revoked');

      const confirmed = await revoke({ connection_id: connectionId, confirm: 'yes' });
      expect(confirmed.status).toBe(303);
      expect(new URL(confirmed.headers.get('location') ?? '', site).search).toBe('?revoked=connection');
      const refused = await refusal(app, tokens.access_token, 1_000);
      expect(refused).toMatchObject({ status: 401, code: 'token_invalid' });
      expect(refused.ms).toBeLessThanOrEqual(1_000);
      expectOAuthError(await refresh(tokens.refresh_token), 400, 'invalid_grant');
      const after = await (await fetch(`${site}/account`, { headers: { cookie } })).text();
      expect(after).not.toContain(connectionId);
      // A second confirmation finds nothing to revoke.
      expect((await revoke({ connection_id: connectionId, confirm: 'yes' })).status).toBe(404);
    });
  });

  describe('several connections of one host as one agent (one client_id, installed on several machines)', () => {
    /** The connections /account lists as `agentName`, each item's markup up to the next. */
    const connectionItems = (account: string, agentName: string): string[] =>
      account
        .split('<li class="grant connection">')
        .slice(1)
        .filter((item) => item.includes(`connected as ${agentName}<`));
    /** When a listed connection was approved: the first time of its item. */
    const approvedOf = (item: string): string => /<time datetime="([^"]+)"/.exec(item)?.[1] ?? '';

    it(`keeps ${HOST_CONNECTIONS_MAX}, each listed on /account: the exchange of one more revokes the oldest approved`, async () => {
      const connections: IssuedTokens[] = [await connected({}, {}, 'fleet-host')];
      const agentId = connections[0]?.agent_id ?? '';
      for (let i = 1; i <= HOST_CONNECTIONS_MAX; i += 1) {
        clock.advance(60_000);
        connections.push(await connected({}, {}, undefined, agentId));
      }
      expect(new Set(connections.map((tokens) => tokens.agent_id))).toEqual(new Set([agentId]));
      const [oldest, ...kept] = connections as [IssuedTokens, ...IssuedTokens[]];
      expect(await refusal(app, oldest.access_token, 1_000)).toMatchObject({ status: 401, code: 'token_invalid' });
      expectOAuthError(await refresh(oldest.refresh_token), 400, 'invalid_grant');
      for (const tokens of kept) {
        const mcp = await mcpPost(app, tokens.access_token, 'one of ten');
        expect(mcp.status).toBe(200);
        await mcp.body?.cancel();
      }
      // Ten connections as fleet-host, told apart by their approval times, each with its own Revoke.
      const account = await (await fetch(`${site}/account`, { headers: { cookie } })).text();
      const rows = connectionItems(account, 'fleet-host');
      expect(rows).toHaveLength(HOST_CONNECTIONS_MAX);
      const approvedAt = rows.map(approvedOf);
      expect(new Set(approvedAt).size).toBe(HOST_CONNECTIONS_MAX);
      expect(new Set(rows.map((row) => inputValue(row, 'connection_id'))).size).toBe(HOST_CONNECTIONS_MAX);
    });

    it('revokes one of them on /account and leaves the others working', async () => {
      const first = await connected({}, {}, 'twice-host');
      clock.advance(60_000);
      const second = await connected({}, {}, undefined, first.agent_id);
      const account = await (await fetch(`${site}/account`, { headers: { cookie } })).text();
      const rows = connectionItems(account, 'twice-host');
      expect(rows).toHaveLength(2);
      // The human tells the two apart by when each was approved.
      const olderRow = [...rows].sort((a, b) => approvedOf(a).localeCompare(approvedOf(b)))[0] ?? '';
      expect(approvedOf(olderRow)).not.toBe(approvedOf(rows.find((row) => row !== olderRow) ?? ''));
      const revoke = (fields: Record<string, string>): Promise<Response> =>
        fetch(`${site}/account/revoke`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
          body: new URLSearchParams({ csrf: inputValue(account, 'csrf'), ...fields }).toString(),
        });
      const question = await (await revoke({ connection_id: inputValue(olderRow, 'connection_id') })).text();
      expect(question).toContain('Other connections of this host stay.');
      expect((await revoke({ connection_id: inputValue(olderRow, 'connection_id'), confirm: 'yes' })).status).toBe(303);
      expect(await refusal(app, first.access_token, 1_000)).toMatchObject({ status: 401, code: 'token_invalid' });
      await postViaMcp(app, second.access_token, 'the other connection still works');
      expect((await refresh(second.refresh_token)).status).toBe(200);
    });
  });

  describe('revoking at {api_url}/oauth/revoke (RFC 7009)', () => {
    it('ends the whole connection for its refresh token: the access token is refused, the refresh token is invalid_grant; unknown tokens answer 200', async () => {
      const tokens = await connected();
      const revoke = (token: string): Promise<Response> =>
        fetch(`${app.urls.apiUrl}/oauth/revoke`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ token }).toString(),
        });
      expect((await revoke(tokens.refresh_token)).status).toBe(200);
      expect(await refusal(app, tokens.access_token, 1_000)).toMatchObject({ status: 401, code: 'token_invalid' });
      expectOAuthError(await refresh(tokens.refresh_token), 400, 'invalid_grant');
      expect((await revoke(tokens.refresh_token)).status).toBe(200);
      expect((await revoke('agr_neverIssued')).status).toBe(200);
    });

    it('ignores a token_type_hint it does not know, as the document says, and refuses one over 50 characters', async () => {
      const revoke = (hint: string): Promise<Response> =>
        fetch(`${app.urls.apiUrl}/oauth/revoke`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ token: 'agr_neverIssued', token_type_hint: hint }).toString(),
        });
      expect((await revoke('id_token')).status).toBe(200);
      expect((await revoke('h'.repeat(50))).status).toBe(200);
      const refused = await revoke('h'.repeat(51));
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as OAuthErrorBody).error).toBe('invalid_request');
    });
  });

  describe('registration (RFC 7591)', () => {
    it('refuses redirect URIs that are not https, loopback http or a private-use scheme, and client secrets', async () => {
      for (const uri of ['http://example.com/callback', 'javascript:alert(1)', 'https://host.example/cb#frag', 'myapp:/callback']) {
        const response = await register(app, { redirect_uris: [uri] });
        expect(response.status, uri).toBe(400);
        expect(((await response.json()) as OAuthErrorBody).error, uri).toBe('invalid_redirect_uri');
      }
      const secret = await register(app, { redirect_uris: [REDIRECT], token_endpoint_auth_method: 'client_secret_basic' });
      expect(secret.status).toBe(400);
      expect(((await secret.json()) as OAuthErrorBody).error).toBe('invalid_client_metadata');
      const native = await register(app, { redirect_uris: ['com.example.host:/callback'] });
      expect(native.status).toBe(201);
    });

    it('takes what the OpenAPI document allows and refuses what it does not (empty lists are the defaults)', async () => {
      const document = (await (await fetch(`${app.urls.siteUrl}/openapi.json`)).json()) as {
        paths: Record<string, Record<string, { requestBody: { content: Record<string, { schema: object }> } }>>;
      };
      const schema = document.paths['/oauth/register']?.post?.requestBody.content['application/json']?.schema;
      const ajv = new Ajv2020({ strict: false });
      const valid = ajv.compile(schema ?? {});
      const cases: [Record<string, unknown>, boolean][] = [
        [{ redirect_uris: ['https://app.example/cb'], grant_types: [], response_types: [] }, true],
        [{ redirect_uris: ['https://app.example/cb'], grant_types: ['refresh_token'] }, false],
        [{ redirect_uris: ['https://app.example/cb'], response_types: ['token'] }, false],
        [{ redirect_uris: ['https://app.example/cb'], client_uri: 'http://app.example' }, false],
        [{ redirect_uris: [''] }, false],
      ];
      for (const [metadata, allowed] of cases) {
        expect(valid(metadata), JSON.stringify(metadata)).toBe(allowed);
        expect((await register(app, metadata)).status, JSON.stringify(metadata)).toBe(allowed ? 201 : 400);
      }
    });
  });

  describe('client metadata documents on loopback (OAUTH_CIMD_ALLOW_LOOPBACK=true)', () => {
    let documents: Server;
    let base: string;
    const requests: string[] = [];
    const timers = new Set<NodeJS.Timeout>();

    const documentOf = (path: string, overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
      client_id: `${base}${path}`,
      client_name: 'Loopback Test Host',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      ...overrides,
    });

    const json = (res: ServerResponse, body: unknown): void => {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
    };

    beforeAll(async () => {
      documents = createServer((req, res) => {
        const path = req.url ?? '';
        requests.push(path);
        if (path === '/good.json') return json(res, documentOf(path));
        if (path === '/big.json') return json(res, documentOf(path, { software_statement: 'x'.repeat(6_000) }));
        if (path === '/big-chunked.json') {
          // No Content-Length: the limit must hold on the bytes as they come.
          const body = JSON.stringify(documentOf(path, { software_statement: 'x'.repeat(6_000) }));
          res.writeHead(200, { 'content-type': 'application/json' });
          for (let i = 0; i < body.length; i += 1_000) res.write(body.slice(i, i + 1_000));
          return res.end();
        }
        if (path === '/slow.json') {
          const timer = setTimeout(() => {
            timers.delete(timer);
            json(res, documentOf(path));
          }, 4_000);
          timers.add(timer);
          return;
        }
        if (path === '/cached.json') {
          res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=300' }).end(JSON.stringify(documentOf(path)));
          return;
        }
        if (path === '/other.json') return json(res, documentOf(path, { client_id: `${base}/good.json` }));
        if (path === '/moved.json') return res.writeHead(302, { location: `${base}/good.json` }).end();
        res.writeHead(404).end();
      });
      await new Promise<void>((resolve) => documents.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(documents.address() as { port: number }).port}`;
    });

    afterAll(async () => {
      for (const timer of timers) clearTimeout(timer);
      documents.closeAllConnections();
      await new Promise((resolve) => documents.close(resolve));
    });

    it('connects a host whose client_id is its document: consent names it and its domain, the token works on MCP', async () => {
      const client = `${base}/good.json`;
      const { verifier, challenge } = pkce();
      const { response, html } = await answer(request(challenge, { client_id: client }), 'approve', 'documented-host');
      expect(requests).toContain('/good.json');
      expect(html).toContain('Loopback Test Host');
      expect(html).toContain('<span class="badge">from 127.0.0.1</span>');
      expect(html).not.toContain('data-testid="unverified"');
      const location = expectAuthorizationResponse(app, response);
      const answered = await exchange({ code: location.searchParams.get('code') ?? '', verifier, clientId: client });
      expect(answered.status, JSON.stringify(answered.body)).toBe(200);
      const tokens = answered.body as IssuedTokens;
      await postViaMcp(app, tokens.access_token, 'from a documented host');
      const refreshed = await refresh(tokens.refresh_token, client);
      expect(refreshed.status).toBe(200);
      // The code was issued to the document's URL: a registered client cannot exchange it.
      expectOAuthError(await exchange({ ...(await approved({ client_id: client })), clientId }), 400, 'invalid_grant');
    });

    it('fetches a document again while its Cache-Control says no-store, and once while max-age holds', async () => {
      const count = (path: string): number => requests.filter((p) => p === path).length;
      const good = count('/good.json');
      for (let i = 0; i < 2; i += 1) expect((await authorize(app, request(pkce().challenge, { client_id: `${base}/good.json` }), cookie)).status).toBe(200);
      expect(count('/good.json')).toBeGreaterThanOrEqual(good + 2);
      for (let i = 0; i < 3; i += 1) expect((await authorize(app, request(pkce().challenge, { client_id: `${base}/cached.json` }), cookie)).status).toBe(200);
      expect(count('/cached.json')).toBe(1);
    });

    it.each([
      ['over 5,120 bytes', '/big.json', /larger than 5120 bytes/],
      ['over 5,120 bytes, chunked without a length', '/big-chunked.json', /larger than 5120 bytes/],
      ['whose client_id is another URL', '/other.json', /another client_id than its own URL/],
    ])('refuses a document %s on a 400 page', async (_what, path, why) => {
      await expectRefusalPage(await authorize(app, request(pkce().challenge, { client_id: `${base}${path}` }), cookie), why);
      expect(requests).toContain(path);
    });

    it('refuses a document that answers after 4 s, once 3 s have passed, on a 400 page', async () => {
      const started = Date.now();
      await expectRefusalPage(await authorize(app, request(pkce().challenge, { client_id: `${base}/slow.json` }), cookie), /did not answer within 3000 ms/);
      const took = Date.now() - started;
      expect(took).toBeGreaterThanOrEqual(2_900);
      expect(took).toBeLessThan(4_000);
    }, 15_000);

    it('refuses a document that answers 302, without following it', async () => {
      const fetchedGood = requests.filter((path) => path === '/good.json').length;
      await expectRefusalPage(await authorize(app, request(pkce().challenge, { client_id: `${base}/moved.json` }), cookie), /redirects are not followed/);
      expect(requests).toContain('/moved.json');
      expect(requests.filter((path) => path === '/good.json').length).toBe(fetchedGood);
    });

    describe('without the setting', () => {
      let strict: Embedded;
      let listener: TcpServer;
      let listenerPort: number;
      const connections: Socket[] = [];

      beforeAll(async () => {
        strict = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
        // Whatever connects here (TLS or not) is written down: nothing may.
        listener = createTcpServer((socket) => {
          connections.push(socket);
          socket.destroy();
        });
        await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
        listenerPort = (listener.address() as { port: number }).port;
      });

      afterAll(async () => {
        await new Promise((resolve) => listener.close(resolve));
        await strict.stop();
      });

      it.each([
        ['http on loopback', () => `${base}/good.json`, /must be served over https/],
        ['https on a loopback address', () => `https://127.0.0.1:${listenerPort}/client.json`, /private address/],
        ['https on a private address', () => 'https://10.0.0.1/client.json', /private address/],
      ])('refuses a client_id %s on a 400 page, sending no request', async (_what, clientIdOf, why) => {
        const before = requests.length;
        const query = {
          response_type: 'code',
          client_id: clientIdOf(),
          redirect_uri: REDIRECT,
          code_challenge: pkce().challenge,
          code_challenge_method: 'S256',
          state: STATE,
        };
        await expectRefusalPage(await authorize(strict, query), why);
        expect(requests.length).toBe(before);
        expect(connections).toHaveLength(0);
      });
    });
  });
});

describe('OAuth registration rate limit', () => {
  let app: Embedded;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
  });

  afterAll(async () => {
    await app.stop();
  });

  it('registers 20 clients per address in an hour, then answers 429 with Retry-After', async () => {
    for (let i = 1; i <= 20; i += 1)
      expect((await register(app, { redirect_uris: [REDIRECT], client_name: `host ${i}` })).status, `registration ${i}`).toBe(201);
    const refused = await register(app, { redirect_uris: [REDIRECT], client_name: 'one too many' });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    await refused.body?.cancel();
  });
});

describe('the OAuth endpoints with a method they do not take', () => {
  let app: Embedded;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
  });

  afterAll(async () => {
    await app.stop();
  });

  // The metadata names each one: a client that opens it (GET) learns the method, not a 404.
  it.each(['/oauth/device_authorization', '/oauth/token', '/oauth/register', '/oauth/revoke'])(
    'answers GET, PUT and DELETE on {api_url}%s with a 405 problem and Allow: POST, OPTIONS with 204',
    async (path) => {
      const url = `${app.urls.apiUrl}${path}`;
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const response = await fetch(url, { method });
        expect(response.status, method).toBe(405);
        expect(response.headers.get('allow')).toBe('POST');
        expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        const problem = (await response.json()) as Problem;
        expect(problem).toMatchObject({ status: 405, code: 'invalid_request', type: `${app.urls.siteUrl}/problems/method-not-allowed` });
        expect(problem.remedy).toContain('POST');
      }
      const options = await fetch(url, { method: 'OPTIONS' });
      expect(options.status).toBe(204);
      expect(options.headers.get('allow')).toBe('POST');
      const head = await fetch(url, { method: 'HEAD' });
      expect(head.status).toBe(405);
    },
  );

  // The metadata names it beside the others: the methods it does not take are answered the same way.
  it('answers PUT, DELETE and PATCH on {site_url}/authorize with a 405 problem and Allow: GET, HEAD, POST, OPTIONS with 204', async () => {
    const url = `${app.urls.siteUrl}/authorize`;
    for (const method of ['PUT', 'DELETE', 'PATCH']) {
      const response = await fetch(url, { method });
      expect(response.status, method).toBe(405);
      expect(response.headers.get('allow')).toBe('GET, HEAD, POST');
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      const problem = (await response.json()) as Problem;
      expect(problem).toMatchObject({ status: 405, code: 'invalid_request', type: `${app.urls.siteUrl}/problems/method-not-allowed` });
      expect(problem.remedy).toContain('GET, HEAD, POST');
    }
    const options = await fetch(url, { method: 'OPTIONS' });
    expect(options.status).toBe(204);
    expect(options.headers.get('allow')).toBe('GET, HEAD, POST');
    expect(await options.text()).toBe('');
  });
});
