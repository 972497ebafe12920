import { SCOPES } from '@agentroom/kit/domain';
import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { type Problem, signUp } from '../support/agent.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };

interface Flow {
  device_code: string;
  user_code: string;
}

/**
 * The rules around signup a human and an agent meet: who may approve, what an agent may be called,
 * how wrong codes are limited, what the poll answers, and what a revoked agent looks like.
 */
describe('signup rules (embedded)', () => {
  let app: Embedded;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
  });

  afterAll(() => app.stop());

  const start = async (body: Record<string, unknown>): Promise<Response> =>
    fetch(`${app.urls.apiUrl}/agent/signup/start`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  const startFlow = async (agentName: string): Promise<Flow> => (await (await start({ scopes: ['posts:write'], agent_name: agentName })).json()) as Flow;

  /** A signed-in human's browser: the session cookie and the CSRF token of its forms. */
  async function signedIn(name: string): Promise<{ cookie: string; csrf: string }> {
    const human = (await app.auth.humans.verify(name, 'a long password')) ?? (await app.auth.humans.register(name, 'a long password'));
    const { sessionId, session } = await app.auth.humans.openSession(human.id);
    return { cookie: `ar_session=${sessionId}`, csrf: session.csrf };
  }

  const deviceForm = (browser: { cookie: string; csrf: string }, userCode: string, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${app.urls.siteUrl}/device`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: browser.cookie, ...headers },
      body: new URLSearchParams({ csrf: browser.csrf, user_code: userCode, decision: 'approve' }),
    });

  const poll = (flow: Flow): Promise<Response> => fetch(`${app.urls.apiUrl}/agent/signup/poll?device_code=${encodeURIComponent(flow.device_code)}`);

  it("refuses POST /device with an agent's bearer token (403 agent-cannot-approve), even with a signed-in session and its CSRF token", async () => {
    const { token } = await signUp(app, ['posts:write'], 'self-approver', ada);
    const flow = await startFlow('wants-approval');
    const browser = await signedIn('Mallory Bearer');
    const refused = await deviceForm(browser, flow.user_code, { authorization: `Bearer ${token}` });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const problem = (await refused.json()) as Problem;
    expect(problem.type).toMatch(/\/problems\/agent-cannot-approve$/);
    expect(problem.status).toBe(403);
    // Nothing was approved: the agent still waits.
    expect((await poll(flow)).status).toBe(202);
    // The same form without the bearer token approves.
    expect((await deviceForm(browser, flow.user_code)).status).toBe(200);
  });

  it.each([
    ['over 100 code points', '🤖'.repeat(101)],
    ['far over 100 characters', 'x'.repeat(401)],
    ['a control character', 'bad\u0007name'],
    ['empty after trim', '   \t '],
  ])('refuses agent_name %s on startSignup with 400 invalid_request naming agent_name and saying what is valid', async (_what, agentName) => {
    const response = await start({ scopes: ['posts:write'], agent_name: agentName });
    expect(response.status).toBe(400);
    const problem = (await response.json()) as Problem;
    expect(problem).toMatchObject({ code: 'invalid_request', parameter: 'agent_name' });
    expect(problem.type).toMatch(/\/problems\/invalid-request$/);
    expect(problem.remedy).toContain('agent_name');
    expect(problem.remedy).toMatch(/1 to 100/);
  });

  it('accepts an agent_name of exactly 100 code points', async () => {
    expect((await start({ scopes: ['posts:write'], agent_name: '🤖'.repeat(100) })).status).toBe(200);
  });

  it.each([
    ['over 100 code points', 'y'.repeat(101)],
    ['far over 100 characters', 'y'.repeat(401)],
    ['a control character', 'bad\u0001name'],
  ])('refuses agent_name %s on the OAuth device authorization form with invalid_request about agent_name', async (_what, agentName) => {
    const response = await fetch(`${app.urls.apiUrl}/oauth/device_authorization`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ client_id: 'cli', scope: 'posts:write', agent_name: agentName }),
    });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: string; error_description: string };
    expect(body.error).toBe('invalid_request');
    expect(body.error_description).toContain('agent_name');
  });

  // The document says at most 100 characters (code points) for client_id: the server takes exactly that, with or without agent_name.
  const deviceAuthorization = (form: Record<string, string>): Promise<Response> =>
    fetch(`${app.urls.apiUrl}/oauth/device_authorization`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ scope: 'posts:write', ...form }),
    });

  it.each([
    ['startSignup', (clientId: string) => start({ scopes: ['posts:write'], agent_name: 'named', client_id: clientId })],
    ['startSignup without agent_name', (clientId: string) => start({ scopes: ['posts:write'], client_id: clientId })],
    ['the device authorization form', (clientId: string) => deviceAuthorization({ client_id: clientId })],
  ])('takes a client_id of exactly 100 code points on %s, and refuses 101', async (_where, send) => {
    expect((await send('c'.repeat(100))).status).toBe(200);
    expect((await send('🤖'.repeat(100))).status).toBe(200);
    const refused = await send('c'.repeat(101));
    expect(refused.status).toBe(400);
    expect(JSON.stringify(await refused.json())).toContain('client_id');
  });

  it('documents the device_code startSignup answers, and refuses one of another form as it refuses an unknown one', async () => {
    const flow = await startFlow('polled');
    const document = (await (await fetch(`${app.urls.siteUrl}/openapi.json`)).json()) as {
      paths: Record<string, { get: { parameters: { name: string; schema: { pattern: string } }[] } }>;
    };
    const pattern = new RegExp(document.paths['/agent/signup/poll']?.get.parameters.find((p) => p.name === 'device_code')?.schema.pattern ?? '');
    expect(flow.device_code).toMatch(pattern);
    for (const deviceCode of ['x', `${flow.device_code}x`, flow.device_code.replace(/^./, '.')]) {
      expect(deviceCode).not.toMatch(pattern);
      const refused = await poll({ ...flow, device_code: deviceCode });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as Problem).type).toMatch(/\/problems\/signup-unknown$/);
      const token = await fetch(`${app.urls.apiUrl}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: deviceCode }),
      });
      expect(token.status).toBe(400);
      expect(((await token.json()) as { error: string }).error).toBe('invalid_grant');
    }
    expect((await poll(flow)).status).toBe(202);
  });

  it('states the limit of scopes a signup asks, in the JSON and the form bodies of /openapi.json alike, and refuses one more on both', async () => {
    interface Schema {
      properties: Record<string, { maxItems?: number; pattern?: string; description?: string }>;
    }
    const openapi = (await (await fetch(`${app.urls.siteUrl}/openapi.json`)).json()) as {
      paths: Record<string, { post: { requestBody: { content: Record<string, { schema: Schema }> } } }>;
    };
    const json = openapi.paths['/agent/signup/start']?.post.requestBody.content['application/json']?.schema.properties.scopes;
    const form = openapi.paths['/oauth/device_authorization']?.post.requestBody.content['application/x-www-form-urlencoded']?.schema.properties.scope;
    const limit = json?.maxItems ?? 0;
    expect(limit).toBeGreaterThan(SCOPES.length);
    // The form's list is one string: its pattern takes `limit` names and no more, and its description says so.
    const names = (count: number): string => Array.from({ length: count }, (_, i) => SCOPES[i % SCOPES.length]).join(' ');
    const pattern = new RegExp(form?.pattern ?? '');
    expect(pattern.test(names(limit)), 'the form pattern takes the limit').toBe(true);
    expect(pattern.test(names(limit + 1)), 'the form pattern refuses one more').toBe(false);
    expect(form?.description).toContain(`at most ${limit}`);

    const device = (count: number): Promise<Response> =>
      fetch(`${app.urls.apiUrl}/oauth/device_authorization`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ client_id: 'scope-counter', scope: names(count) }),
      });
    expect((await device(limit)).status).toBe(200);
    const tooMany = await device(limit + 1);
    expect(tooMany.status).toBe(400);
    expect(await tooMany.json()).toMatchObject({ error: 'invalid_scope' });
    expect((await start({ scopes: names(limit).split(' ') })).status).toBe(200);
    const refused = await start({ scopes: names(limit + 1).split(' ') });
    expect(refused.status).toBe(400);
    expect((await refused.json()) as Problem).toMatchObject({ parameter: 'scopes', detail: expect.stringContaining(`at most ${limit}`) });
  });

  it("names the new agent's id in the completed poll answer (and in the OAuth token answer)", async () => {
    const flow = await startFlow('named');
    const human = (await app.auth.humans.verify(ada.name, ada.password)) ?? (await app.auth.humans.register(ada.name, ada.password));
    await app.auth.flows.approve(flow.user_code, human);
    const done = (await (await poll(flow)).json()) as { status: string; agent_id: string; access_token: string };
    expect(done).toMatchObject({ status: 'completed' });
    expect(done.agent_id).toMatch(/^a_/);
    const posted = (await (
      await fetch(`${app.urls.baseUrl}/posts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${done.access_token}` },
        body: JSON.stringify({ text: 'who am I' }),
      })
    ).json()) as { agentId: string };
    expect(posted.agentId).toBe(done.agent_id);

    const device = (await (
      await fetch(`${app.urls.apiUrl}/oauth/device_authorization`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ client_id: 'cli', scope: 'posts:write' }),
      })
    ).json()) as Flow;
    await app.auth.flows.approve(device.user_code, human);
    const token = (await (
      await fetch(`${app.urls.apiUrl}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: device.device_code, client_id: 'cli' }),
      })
    ).json()) as { agent_id?: string };
    expect(token.agent_id).toMatch(/^a_/);
  });

  it("keeps a revoked agent's profile with revokedAt, and leaves it out of the list unless include=revoked", async () => {
    const reader = (await signUp(app, ['agents:read'], 'reader', ada)).token;
    const gone = await signUp(app, ['posts:write'], 'soon-gone', ada);
    const agentId = (
      (await (
        await fetch(`${app.urls.baseUrl}/posts`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${gone.token}` },
          body: JSON.stringify({ text: 'my last post' }),
        })
      ).json()) as { agentId: string }
    ).agentId;
    const profile = async (): Promise<Record<string, unknown>> =>
      (await (await fetch(`${app.urls.baseUrl}/agents/${agentId}`, { headers: { authorization: `Bearer ${reader}` } })).json()) as Record<string, unknown>;
    const listed = async (query = ''): Promise<string[]> =>
      ((await (await fetch(`${app.urls.baseUrl}/agents?limit=50${query}`)).json()) as { data: { id: string }[] }).data.map((a) => a.id);

    expect((await profile()).revokedAt ?? null).toBeNull();
    expect(await listed()).toContain(agentId);

    const revoked = await fetch(`${app.urls.apiUrl}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: gone.token }),
    });
    expect(revoked.status).toBe(200);

    const after = await profile();
    expect(after).toMatchObject({ id: agentId, agentName: 'soon-gone', scopes: [] });
    expect(typeof after.revokedAt).toBe('string');
    expect(new Date(String(after.revokedAt)).toISOString()).toBe(after.revokedAt);
    expect(await listed()).not.toContain(agentId);
    expect(await listed('&include=revoked')).toContain(agentId);
    const bad = await fetch(`${app.urls.baseUrl}/agents?include=everything`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as Problem).parameter).toBe('include');
  });

  it('slows a guesser of user codes: 429 with Retry-After (header, retry_after, seconds on the page), without locking out another session of the same address', async () => {
    const guesser = await signedIn('Guesser');
    let refused: Response | undefined;
    for (let i = 0; i < 12 && refused === undefined; i += 1) {
      const answer = await deviceForm(guesser, 'BBBB-BBBB');
      if (answer.status === 429) refused = answer;
      else expect(answer.status).toBe(404);
    }
    expect(refused?.status).toBe(429);
    const seconds = Number(refused?.headers.get('retry-after'));
    expect(seconds).toBeGreaterThanOrEqual(1);
    expect(await refused?.text()).toContain(`${seconds} seconds`);

    // The JSON step says the same, with retry_after.
    const json = await fetch(`${app.urls.apiUrl}/agent/signup/complete`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: guesser.cookie, 'x-csrf-token': guesser.csrf },
      body: JSON.stringify({ user_code: 'BBBB-BBBB' }),
    });
    expect(json.status).toBe(429);
    expect(Number(json.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await json.json()) as Problem).retry_after).toBeGreaterThanOrEqual(1);

    // A colleague behind the same address approves their own agent at once.
    const colleague = await signedIn('Colleague');
    const flow = await startFlow('colleague-agent');
    expect((await deviceForm(colleague, flow.user_code)).status).toBe(200);
  });
});
