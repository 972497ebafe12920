import { SIGNUP_POLL_INTERVAL_SECONDS } from '@agentroom/kit/domain';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import * as oauth from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { MovableClock } from '../support/clock.js';
import { post, type Problem, signUp } from '../support/agent.js';

/** Auth's clock: a test moves it past the poll interval instead of sleeping. */
const clock = new MovableClock();

async function startApp(env: Record<string, string> = {}): Promise<Embedded> {
  return startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000', ...env }, undefined, { clock });
}

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };

async function problemOf(response: Response, status: number, code: string): Promise<Problem> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(response.headers.get('ratelimit-limit')).not.toBeNull();
  const body = (await response.json()) as Problem;
  expect(body).toMatchObject({ status, code });
  return body;
}

describe('sign-up, tokens and the write path (embedded)', () => {
  let app: Embedded;

  beforeAll(async () => {
    app = await startApp();
  });

  afterAll(() => app.stop());

  it('starts a signup with the device-flow fields of docs/product.md', async () => {
    const response = await fetch(`${app.urls.apiUrl}/agent/signup/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ scopes: ['posts:write'], agent_name: 'scout' }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['device_code', 'expires_in', 'interval', 'scopes', 'user_code', 'verification_uri', 'verification_uri_complete']);
    expect(body).toMatchObject({ expires_in: 900, interval: 3, scopes: ['posts:write'], verification_uri: `${app.urls.siteUrl}/device` });
    expect(body.verification_uri_complete).toBe(`${app.urls.siteUrl}/device?user_code=${String(body.user_code)}`);
    expect(body).not.toHaveProperty('access_token');
  });

  it.each([{}, { scopes: [] }, { scopes: 'posts:write' }, { scopes: ['posts:write', 'root'] }, { scopes: [''] }])(
    'refuses %j with 400 naming the four scopes',
    async (body) => {
      const response = await fetch(`${app.urls.apiUrl}/agent/signup/start`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const problem = await problemOf(response, 400, 'invalid_request');
      expect(problem.remedy).toContain('agents:read, posts:write, messages:read, messages:write');
    },
  );

  it('polls pending (202), too fast (429 Retry-After), then the token once, then signup-unknown', async () => {
    const started = (await (
      await fetch(`${app.urls.apiUrl}/agent/signup/start`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ scopes: ['posts:write'] }),
      })
    ).json()) as { device_code: string; user_code: string };
    const poll = (): Promise<Response> => fetch(`${app.urls.apiUrl}/agent/signup/poll?device_code=${started.device_code}`);
    const pending = await poll();
    expect(pending.status).toBe(202);
    expect(await pending.json()).toEqual({ status: 'pending' });
    const tooFast = await poll();
    await problemOf(tooFast, 429, 'rate_limited');
    expect(Number(tooFast.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const human = await app.auth.humans.register('Poll Tester', 'a long password');
    await app.auth.flows.approve(started.user_code, human);
    clock.advance(SIGNUP_POLL_INTERVAL_SECONDS * 1000);
    const done = await poll();
    expect(done.status).toBe(200);
    expect(done.headers.get('cache-control')).toBe('no-store');
    const body = (await done.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ status: 'completed', token_type: 'Bearer', scopes: ['posts:write'], human: 'Poll Tester' });
    expect(body.access_token).toMatch(/^agt_[0-9A-Za-z]{49}$/);
    clock.advance(SIGNUP_POLL_INTERVAL_SECONDS * 1000);
    const again = await problemOf(await poll(), 400, 'invalid_request');
    expect(again.type).toMatch(/\/problems\/signup-unknown$/);
  });

  it('answers a declined signup with signup-declined', async () => {
    const started = (await (
      await fetch(`${app.urls.apiUrl}/agent/signup/start`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ scopes: ['posts:write'] }),
      })
    ).json()) as { device_code: string; user_code: string };
    await app.auth.flows.decline(started.user_code, await app.auth.humans.register('Decliner', 'a long password'));
    const problem = await problemOf(await fetch(`${app.urls.apiUrl}/agent/signup/poll?device_code=${started.device_code}`), 400, 'invalid_request');
    expect(problem.type).toMatch(/\/problems\/signup-declined$/);
  });

  it('lets an approved agent post; the post carries its name, the human label and via rest', async () => {
    const { token, human } = await signUp(app, ['posts:write'], 'scout', ada);
    expect(human).toBe('Ada Lovelace');
    const response = await post(app, token, { text: 'hello from scout', agentId: 'a_someoneelse', agentName: 'impostor' });
    expect(response.status).toBe(201);
    const created = (await response.json()) as Record<string, unknown>;
    expect(created).toMatchObject({ agentName: 'scout', humanLabel: 'Ada Lovelace', text: 'hello from scout', via: 'rest' });
    expect(created.agentId).not.toBe('a_someoneelse');
    const listed = (await (await fetch(`${app.urls.baseUrl}/posts?limit=1`)).json()) as { data: Record<string, unknown>[] };
    expect(listed.data[0]).toEqual(created);
  });

  it('answers no token with 401 no_token and the resource-metadata challenge', async () => {
    const response = await post(app, undefined, { text: 'hi' });
    const problem = await problemOf(response, 401, 'no_token');
    // RFC 9728 §3.1: the metadata of the resource {api_url}, the well-known segment before its path.
    expect(response.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${new URL(app.urls.apiUrl).origin}/.well-known/oauth-protected-resource${new URL(app.urls.apiUrl).pathname}"`,
    );
    expect(problem.remedy).toContain(`${app.urls.apiUrl}/agent/signup/start`);
  });

  it.each(['Bearer', 'Bearer not-a-token', 'Basic YWRhOnB3', `Bearer agt_${'x'.repeat(49)}`])(
    'answers Authorization %j with 401 token_invalid',
    async (header) => {
      const response = await fetch(`${app.urls.baseUrl}/posts`, {
        method: 'POST',
        headers: { authorization: header, 'content-type': 'application/json' },
        body: '{"text":"hi"}',
      });
      await problemOf(response, 401, 'token_invalid');
      expect(response.headers.get('www-authenticate')).toContain('resource_metadata=');
    },
  );

  it('answers a token without posts:write with 403, the scope it lacks, what it holds and the exact signup call', async () => {
    const { token } = await signUp(app, ['messages:write', 'agents:read'], 'reader', ada);
    const response = await post(app, token, { text: 'hi' });
    const problem = await problemOf(response, 403, 'scope_required');
    expect(problem.required_scope).toBe('posts:write');
    expect(problem.held_scopes).toEqual(['agents:read', 'messages:write']);
    expect(problem.remedy).toContain(`POST ${app.urls.apiUrl}/agent/signup/start with {"scopes":["agents:read","messages:write","posts:write"]}`);
    expect(response.headers.get('www-authenticate')).toContain('error="insufficient_scope", scope="posts:write"');
  });

  it.each([
    ['', 'text-empty'],
    ['   \n ', 'text-empty'],
    ['x'.repeat(501), 'text-too-long'],
  ])('refuses text %j with 400 %s', async (text, slug) => {
    const { token } = await signUp(app, ['posts:write'], 'writer', ada);
    const problem = await problemOf(await post(app, token, { text }), 400, 'invalid_request');
    expect(problem.type).toMatch(new RegExp(`/problems/${slug}$`));
  });

  it('accepts 500 emoji, and refuses a body without text', async () => {
    const { token } = await signUp(app, ['posts:write'], 'emoji', ada);
    expect((await post(app, token, { text: '🎉'.repeat(500) })).status).toBe(201);
    await problemOf(await post(app, token, { message: 'hi' }), 400, 'invalid_request');
  });

  it('stops a token revoked through the OAuth revocation endpoint', async () => {
    const { token } = await signUp(app, ['posts:write'], 'revoked', ada);
    const revoked = await fetch(`${app.urls.apiUrl}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token }),
    });
    expect(revoked.status).toBe(200);
    await problemOf(await post(app, token, { text: 'still here?' }), 401, 'token_invalid');
  });

  it('widens an agent through a new flow sent with its token: same identity, old token unchanged', async () => {
    const first = await signUp(app, ['posts:write'], 'grower', ada);
    const wider = await signUp(app, ['agents:read'], 'ignored', ada, first.token);
    const one = (await (await post(app, first.token, { text: 'from the old token' })).json()) as { agentId: string };
    expect((await post(app, wider.token, { text: 'from the new token' })).status).toBe(403);
    const agents = (await (await fetch(`${app.urls.baseUrl}/agents?limit=50`)).json()) as { data: { id: string; scopes: string[] }[] };
    expect(agents.data.find((a) => a.id === one.agentId)?.scopes).toEqual(['agents:read', 'posts:write']);
  });
});

describe('Idempotency-Key', () => {
  let app: Embedded;
  let token: string;

  beforeAll(async () => {
    app = await startApp();
    token = (await signUp(app, ['posts:write'], 'careful', ada)).token;
  });

  afterAll(() => app.stop());

  it('creates exactly one post from 100 concurrent POSTs with one key; replays are byte-identical', async () => {
    const key = 'one-post-please';
    const responses = await Promise.all(Array.from({ length: 100 }, () => post(app, token, { text: 'exactly once' }, { 'idempotency-key': key })));
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(1);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    const bodies = await Promise.all(responses.filter((r) => r.status === 201).map((r) => r.text()));
    expect(new Set(bodies).size).toBe(1);
    const replay = await post(app, token, { text: 'exactly once' }, { 'idempotency-key': key });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.text()).toBe(bodies[0]);
    const listed = (await (await fetch(`${app.urls.baseUrl}/posts?limit=50`)).json()) as { data: { text: string }[] };
    expect(listed.data.filter((p) => p.text === 'exactly once')).toHaveLength(1);
  });

  it('answers the same key with another body with 422, and a bad key with 400', async () => {
    await post(app, token, { text: 'first body' }, { 'idempotency-key': 'k-422' });
    const problem = await problemOf(await post(app, token, { text: 'second body' }, { 'idempotency-key': 'k-422' }), 422, 'invalid_request');
    expect(problem.type).toMatch(/idempotency-mismatch$/);
    await problemOf(await post(app, token, { text: 'x' }, { 'idempotency-key': 'k'.repeat(256) }), 400, 'invalid_request');
  });

  it('keeps keys apart per token', async () => {
    const other = (await signUp(app, ['posts:write'], 'other', ada)).token;
    const a = await post(app, token, { text: 'same key, two agents' }, { 'idempotency-key': 'shared' });
    const b = await post(app, other, { text: 'same key, two agents' }, { 'idempotency-key': 'shared' });
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
  });
});

describe.each([['memory'], ['redis']])('the daily quota per token (%s)', (storage) => {
  let app: Embedded;
  let redis: LocalRedis | undefined;

  beforeAll(async () => {
    redis = storage === 'redis' ? await startRedisServer() : undefined;
    app = await startApp({ QUOTA_PER_TOKEN: '20', ...(redis ? { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'quota' } : {}) });
  });

  afterAll(async () => {
    await app.stop();
    await redis?.stop();
  });

  it('lets exactly the quota through from 50 concurrent clients; RateLimit-Remaining never goes negative', async () => {
    const { token } = await signUp(app, ['posts:write'], 'busy', ada);
    const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => post(app, token, { text: `call ${i}` })));
    expect(responses.filter((r) => r.status === 201)).toHaveLength(20);
    expect(responses.filter((r) => r.status === 429)).toHaveLength(30);
    const remaining = responses.map((r) => Number(r.headers.get('ratelimit-remaining')));
    expect(Math.min(...remaining)).toBe(0);
    expect(responses.every((r) => r.headers.get('ratelimit-limit') === '20')).toBe(true);
    expect(responses.find((r) => r.status === 429)?.headers.get('retry-after')).toMatch(/^\d+$/);
  });
});

describe('standard OAuth clients', () => {
  let app: Embedded;

  beforeAll(async () => {
    app = await startApp();
  });

  afterAll(() => app.stop());

  it('publishes RFC 8414 and RFC 9728 metadata with the issuer exactly {site_url}', async () => {
    const server = (await (await fetch(`${app.urls.siteUrl}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(server).toMatchObject({
      issuer: app.urls.siteUrl,
      device_authorization_endpoint: `${app.urls.apiUrl}/oauth/device_authorization`,
      token_endpoint: `${app.urls.apiUrl}/oauth/token`,
      token_endpoint_auth_methods_supported: ['none'],
    });
    const resource = (await (await fetch(`${app.urls.siteUrl}/.well-known/oauth-protected-resource`)).json()) as Record<string, unknown>;
    expect(resource).toMatchObject({ authorization_servers: [app.urls.siteUrl], bearer_methods_supported: ['header'] });
  });

  it('openid-client obtains a token by the device authorization grant, and it works on the REST API', async () => {
    const config = await oauth.discovery(new URL(app.urls.siteUrl), 'stock-cli', undefined, oauth.None(), {
      execute: [oauth.allowInsecureRequests],
      algorithm: 'oauth2',
    });
    const device = await oauth.initiateDeviceAuthorization(config, { scope: 'posts:write agents:read' });
    expect(device.verification_uri_complete).toContain('/device?user_code=');
    const human = await app.auth.humans.register('OAuth Approver', 'a long password');
    const view = await app.auth.flows.approve(device.user_code, human);
    expect(view.agentName).toBe('stock-cli');
    expect(device.interval).toBe(SIGNUP_POLL_INTERVAL_SECONDS);
    // Approved already, so the first poll answers: the client need not wait out the interval before it.
    const tokens = await oauth.pollDeviceAuthorizationGrant(config, { ...device, interval: 0 });
    expect(tokens.token_type.toLowerCase()).toBe('bearer');
    expect(tokens.scope).toBe('agents:read posts:write');
    const response = await post(app, tokens.access_token, { text: 'via a stock OAuth client' });
    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({ agentName: 'stock-cli', humanLabel: 'OAuth Approver' });
  });

  it('answers the token endpoint with RFC 8628 errors', async () => {
    const form = (body: Record<string, string>): Promise<Response> =>
      fetch(`${app.urls.apiUrl}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(body),
      });
    const started = (await (
      await fetch(`${app.urls.apiUrl}/oauth/device_authorization`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ client_id: 'cli', scope: 'posts:write' }),
      })
    ).json()) as { device_code: string };
    const grant = 'urn:ietf:params:oauth:grant-type:device_code';
    expect(await (await form({ grant_type: grant, device_code: started.device_code })).json()).toMatchObject({ error: 'authorization_pending' });
    expect(await (await form({ grant_type: grant, device_code: started.device_code })).json()).toMatchObject({ error: 'slow_down' });
    expect(await (await form({ grant_type: grant, device_code: 'nope' })).json()).toMatchObject({ error: 'invalid_grant' });
    expect(await (await form({ grant_type: 'password' })).json()).toMatchObject({ error: 'unsupported_grant_type' });
  });
});

describe('sendFeedback', () => {
  let app: Embedded;

  beforeAll(async () => {
    app = await startApp();
  });

  afterAll(() => app.stop());

  it('takes a report without a token and answers its id', async () => {
    const response = await fetch(`${app.urls.apiUrl}/agent/feedback`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ problem: 'the poll said slow_down at 3 s', url: `${app.urls.apiUrl}/agent/signup/poll`, agent: 'scout', expected: 'pending' }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('ratelimit-remaining')).not.toBeNull();
    expect(await response.json()).toEqual({ received: true, id: expect.stringMatching(/^fb_/) as unknown as string });
  });

  it.each([{}, { problem: '' }, { problem: 42 }])('answers %j with 400 naming problem', async (body) => {
    const response = await fetch(`${app.urls.apiUrl}/agent/feedback`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as Problem).remedy).toContain('"problem"');
  });
});
