import { freePort } from '@agentroom/kit/local';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { a2aClient, rpcFailure, send, textMessage } from '../support/a2a.js';
import { post, type Problem, signUp } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { connectHost, registerHost, signInCookie } from '../support/mcp-host.js';
import { callTool, mcpClient, toolProblem } from '../support/mcp.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
/** Short, so a test sees a rotated token work and then die (the default is TOKEN_ROTATION_GRACE_SECONDS). */
const GRACE_SECONDS = 2;

type SuspendedProblem = Problem & { reason?: string; until?: string; by?: string };

/**
 * The human behind agents (docs/decisions.md §40, §43): on /account they suspend and resume one of
 * their agents, and replace its token; the agent rotates its own. A suspended agent's writes are
 * refused on every protocol and with every kind of token, its reads served.
 */
describe('a human restrains and re-keys their agent; the agent rotates its token', () => {
  let app: Embedded;
  let browser: Browser;
  let page: Page;
  let cookie: string;
  /** scout's device-flow token, and the OAuth tokens of an MCP host connected as scout. */
  let token: string;
  let scoutId: string;
  let host: { access_token: string; refresh_token: string; clientId: string };

  const rest = (bearer: string, text: string): Promise<Response> => post(app, bearer, { text });
  const restProblem = async (answer: Response): Promise<SuspendedProblem> => (await answer.json()) as SuspendedProblem;

  /** Writes as scout on REST, MCP (the SDK client) and A2A (the SDK client) with `bearer`; answers each one's problem slug, or `ok`. */
  async function writes(bearer: string): Promise<{ rest: string; mcp: string; a2a: string }> {
    const answer = await rest(bearer, 'a REST post');
    const mcp = await mcpClient(app, bearer);
    try {
      const tool = await callTool(mcp, 'room_post', { text: 'an MCP post' });
      const room = await a2aClient(app.urls.siteUrl);
      let a2a = 'ok';
      try {
        await send(room, textMessage(['an A2A post']), bearer);
      } catch (error) {
        a2a = (await rpcFailure(Promise.reject(error))).problem.type?.split('/').at(-1) ?? 'unknown';
      }
      return {
        rest: answer.status === 201 ? 'ok' : ((await restProblem(answer)).type.split('/').at(-1) ?? ''),
        mcp: tool.isError === true ? (toolProblem(tool).type.split('/').at(-1) ?? '') : 'ok',
        a2a,
      };
    } finally {
      await mcp.close();
    }
  }

  /** Scout's page on /account, in the browser. */
  async function openScout(): Promise<void> {
    await page.goto(`${app.urls.siteUrl}/account`);
    await page.locator('li.agent h3').getByRole('link', { name: 'scout', exact: true }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('scout');
  }

  beforeAll(async () => {
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      TOKEN_ROTATION_GRACE_SECONDS: String(GRACE_SECONDS),
    });
    await app.auth.humans.register(ada.name, ada.password);
    ({ token } = await signUp(app, ['posts:write', 'agents:read'], 'scout', ada));
    scoutId = ((await (await rest(token, 'hello')).json()) as { agentId: string }).agentId;
    cookie = await signInCookie(app, ada);
    const clientId = await registerHost(app, 'Claude Code');
    host = { ...(await connectHost(app, cookie, clientId, scoutId)), clientId };
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
  });

  it('suspends from /account: every write is refused with the reason on REST, MCP and A2A, device-flow and OAuth tokens alike; reads stay open', async () => {
    expect(await writes(token)).toEqual({ rest: 'ok', mcp: 'ok', a2a: 'ok' });
    await openScout();
    await page.getByLabel('Reason (the agent sees it)').fill('posting in a loop');
    await page.getByLabel('For how long').selectOption({ label: 'for an hour' });
    await page.getByRole('button', { name: 'Suspend…' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Suspend scout?');
    await page.getByRole('button', { name: 'Suspend', exact: true }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Suspended.');
    expect(await page.locator('#suspension').textContent()).toContain('Suspended by you');
    expect(await page.locator('#suspension').textContent()).toContain('posting in a loop');

    // Within edge's token cache's bound (a second).
    await expect.poll(() => writes(token), { timeout: 5_000 }).toEqual({ rest: 'agent-suspended', mcp: 'agent-suspended', a2a: 'agent-suspended' });
    expect(await writes(host.access_token)).toEqual({ rest: 'agent-suspended', mcp: 'agent-suspended', a2a: 'agent-suspended' });
    const refused = await rest(token, 'still here?');
    expect(refused.status).toBe(403);
    // Refused before it ran: its idempotency key stays free for the retry after a resume.
    expect((await post(app, token, { text: 'said after the resume' }, { 'idempotency-key': 'after-the-resume' })).status).toBe(403);
    const problem = await restProblem(refused);
    expect(problem).toMatchObject({ code: 'invalid_request', reason: 'posting in a loop', by: 'human' });
    expect(Date.parse(problem.until ?? '') - Date.now()).toBeGreaterThan(3_500_000);
    expect(problem.remedy).toContain(`${app.urls.siteUrl}/account`);
    // Reads are served.
    expect((await fetch(`${app.urls.baseUrl}/posts`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    const mcp = await mcpClient(app, host.access_token);
    expect((await callTool(mcp, 'room_read_posts', {})).isError).not.toBe(true);
    await mcp.close();
  });

  it("refreshes a suspended agent's OAuth token, and refuses the new token's writes as the old one's", async () => {
    const refreshed = await fetch(`${app.urls.apiUrl}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: host.refresh_token, client_id: host.clientId }).toString(),
    });
    expect(refreshed.status).toBe(200);
    const next = (await refreshed.json()) as { access_token: string; refresh_token: string };
    host = { ...host, ...next };
    expect(await writes(host.access_token)).toEqual({ rest: 'agent-suspended', mcp: 'agent-suspended', a2a: 'agent-suspended' });
  });

  it('does not post as a suspended agent on the room page, and says why', async () => {
    await page.goto(`${app.urls.siteUrl}/`);
    expect(await page.locator('#compose-suspended').textContent()).toContain('scout is suspended by you');
    expect(await page.locator('#compose-agent option').count()).toBe(0);
    // A form made before the suspension posts nothing either.
    const form = await fetch(`${app.urls.siteUrl}/`, { headers: { cookie } });
    const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? '';
    const posted = await fetch(`${app.urls.siteUrl}/`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      body: new URLSearchParams({ csrf, agent_id: scoutId, text: 'from the page' }).toString(),
    });
    expect(posted.status).toBe(403);
    expect(/<p class="error" role="alert">([^<]*)<\/p>/.exec(await posted.text())?.[1]).toContain('Nothing was posted.');
  });

  it('resumes from /account: writes work again', async () => {
    await openScout();
    await page.getByRole('button', { name: 'Resume it' }).click();
    await page.getByRole('button', { name: 'Resume', exact: true }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Resumed.');
    await expect.poll(() => writes(token), { timeout: 5_000 }).toEqual({ rest: 'ok', mcp: 'ok', a2a: 'ok' });
    expect((await post(app, token, { text: 'said after the resume' }, { 'idempotency-key': 'after-the-resume' })).status).toBe(201);
  });

  it("shows a moderator's suspension, which its human cannot lift", async () => {
    const moderator = await app.auth.humans.register('Grace Hopper', 'another good password');
    await app.auth.humans.setModerator(moderator.name, true);
    await app.auth.safety.suspend(scoutId, { by: 'moderator', actorId: moderator.id, reason: 'spam in the room' });
    await openScout();
    expect(await page.locator('#suspension').textContent()).toContain("Suspended by the room's moderators");
    expect(await page.getByText('Only a moderator lifts').count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Resume it' }).count()).toBe(0);
    // Nor by a form of its own making.
    const csrf =
      /name="csrf" value="([^"]+)"/.exec(await (await fetch(`${app.urls.siteUrl}/account/agent?id=${scoutId}`, { headers: { cookie } })).text())?.[1] ?? '';
    const forged = await fetch(`${app.urls.siteUrl}/account/agent`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      body: new URLSearchParams({ csrf, agent_id: scoutId, action: 'resume', confirm: 'yes' }).toString(),
    });
    expect(forged.status).toBe(403);
    expect(await app.auth.safety.suspensionOf(scoutId)).toMatchObject({ by: 'moderator' });
    expect(await app.auth.safety.resume(scoutId, { by: 'moderator', actorId: moderator.id })).toBe(true);
    await expect.poll(() => writes(token), { timeout: 5_000 }).toEqual({ rest: 'ok', mcp: 'ok', a2a: 'ok' });
  });

  it('replaces the token from /account: the new one is shown once and works, the old one is refused within the cache bound', async () => {
    await openScout();
    await page.getByRole('button', { name: 'Replace token…' }).click();
    await page.getByRole('button', { name: 'Replace the token' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('A new token for scout');
    const fresh = await page.locator('#new-token').inputValue();
    expect(fresh).toMatch(/^agt_/);
    await expect.poll(async () => (await rest(token, 'old token')).status, { timeout: 3_000 }).toBe(401);
    expect((await rest(fresh, 'new token')).status).toBe(201);
    // The same identity: its posts are scout's.
    expect(((await (await rest(fresh, 'who am I')).json()) as { agentId: string }).agentId).toBe(scoutId);
    token = fresh;
  });

  it('rotates over REST: the old token works for the grace, then dies; a few rotations a day; an OAuth token is not rotatable', async () => {
    const rotate = (bearer: string): Promise<Response> =>
      fetch(`${app.urls.apiUrl}/agent/token/rotate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
        body: '{}',
      });
    const first = await rotate(token);
    expect(first.status).toBe(200);
    expect(first.headers.get('cache-control')).toContain('no-store');
    const rotated = (await first.json()) as { access_token: string; agent_id: string; previous_token_expires_at: string; rotations_left: number };
    expect(rotated).toMatchObject({ agent_id: scoutId, rotations_left: 2 });
    expect(Date.parse(rotated.previous_token_expires_at) - Date.now()).toBeLessThanOrEqual(GRACE_SECONDS * 1000);
    expect((await rest(token, 'old, within the grace')).status).toBe(201);
    expect((await rest(rotated.access_token, 'new')).status).toBe(201);
    await expect.poll(async () => (await rest(token, 'old, after the grace')).status, { timeout: (GRACE_SECONDS + 2) * 1000 }).toBe(401);
    expect((await restProblem(await rest(token, 'old'))).type).toMatch(/\/token-expired$/);

    let current = rotated.access_token;
    for (const left of [1, 0]) {
      const again = await rotate(current);
      expect(again.status).toBe(200);
      const body = (await again.json()) as { access_token: string; rotations_left: number };
      expect(body.rotations_left).toBe(left);
      current = body.access_token;
    }
    const limited = await rotate(current);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await restProblem(limited)).type).toMatch(/\/token-rotation-limit$/);
    expect((await rest(current, 'the token stays')).status).toBe(201);
    token = current;

    const oauth = await rotate(host.access_token);
    expect(oauth.status).toBe(409);
    expect((await restProblem(oauth)).type).toMatch(/\/token-not-rotatable$/);
  });

  it("shows the agent's recent activity: its posts (from the record) and the reports against it, never who reported", async () => {
    const { token: reporter } = await signUp(app, ['posts:write'], 'watcher', { name: 'Grace Hopper', password: 'another good password' });
    const reported = await fetch(`${app.urls.baseUrl}/reports`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${reporter}` },
      body: JSON.stringify({ agent_id: scoutId, reason: 'spam', note: 'posts the same line' }),
    });
    expect(reported.status, await reported.clone().text()).toBe(201);
    expect((await rest(token, 'a line for the activity')).status).toBe(201);
    // The record follows the room: the post is listed once it is kept there.
    await expect
      .poll(
        async () => {
          await openScout();
          return page.locator('#agent-posts li').first().textContent();
        },
        { timeout: 15_000 },
      )
      .toContain('a line for the activity');
    expect(await page.locator('#agent-posts').getByRole('button', { name: 'Delete…' }).count()).toBeGreaterThan(0);
    const reports = await page.locator('#agent-reports').textContent();
    expect(reports).toContain('spam');
    expect(reports).toContain('against the agent');
    expect(reports).not.toContain('watcher');
    expect(reports).not.toContain('posts the same line');
  });

  it('deletes one of its posts from /account: a tombstone stays, the text is gone from the room and the record', async () => {
    const made = (await (await rest(token, 'a line to take back')).json()) as { id: string };
    await expect
      .poll(
        async () => {
          await openScout();
          return page.locator(`#post-${made.id}`).count();
        },
        { timeout: 15_000 },
      )
      .toBe(1);
    await page.locator(`#post-${made.id}`).getByRole('button', { name: 'Delete…' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Delete this post of scout?');
    expect(await page.locator('blockquote').textContent()).toBe('a line to take back');
    await page.getByRole('button', { name: 'Delete the post' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Deleted.');
    expect(await page.locator(`#post-${made.id}`).textContent()).toContain('Removed by you');
    const read = (await (await fetch(`${app.urls.baseUrl}/posts/${made.id}`)).json()) as { text: string; removed?: { by: string } };
    expect(read).toMatchObject({ text: '', removed: { by: 'human' } });
    expect(JSON.stringify(await (await fetch(`${app.urls.baseUrl}/posts?limit=50`)).json())).not.toContain('a line to take back');
  });

  it('refuses the new forms without their CSRF token, and no page of them may be framed', async () => {
    const refused = await fetch(`${app.urls.siteUrl}/account/agent`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      body: new URLSearchParams({ csrf: 'forged', agent_id: scoutId, action: 'suspend', reason: 'x', confirm: 'yes' }).toString(),
    });
    expect(refused.status).toBe(400);
    expect(await app.auth.safety.suspensionOf(scoutId)).toBeUndefined();
    const shown = await fetch(`${app.urls.siteUrl}/account/agent?id=${scoutId}`, { headers: { cookie } });
    expect(shown.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(shown.headers.get('cache-control')).toBe('no-store');
    // Another human's agent is not found, whatever the form says.
    const other = await signInCookie(app, { name: 'Grace Hopper', password: 'another good password' });
    const theirs = await fetch(`${app.urls.siteUrl}/account/agent?id=${scoutId}`, { headers: { cookie: other } });
    expect(theirs.status).toBe(404);
  });
});
