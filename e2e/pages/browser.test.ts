import { SIGNUP_POLL_INTERVAL_SECONDS } from '@agentroom/kit/domain';
import { freePort } from '@agentroom/kit/local';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { post, type Problem } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { MovableClock } from '../support/clock.js';

interface Flow {
  device_code: string;
  user_code: string;
  verification_uri_complete: string;
}

describe('a human approves an agent in a real browser', () => {
  let app: Embedded;
  let browser: Browser;
  let page: Page;
  /** Auth's clock: the agent's next poll is one interval later without the test waiting it out. */
  const clock = new MovableClock();

  const startSignup = async (scopes: string[], agentName: string): Promise<Flow> =>
    (await (
      await fetch(`${app.urls.apiUrl}/agent/signup/start`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ scopes, agent_name: agentName }),
      })
    ).json()) as Flow;

  const poll = (flow: Flow): Promise<Response> => fetch(`${app.urls.apiUrl}/agent/signup/poll?device_code=${flow.device_code}`);

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' }, undefined, { clock });
    browser = await launchChromium();
    page = await (await browser.newContext()).newPage();
  }, 60_000);

  afterAll(async () => {
    await browser.close();
    await app.stop();
  });

  it('registers, signs in, sees the agent and its scopes in plain words, approves; the agent gets its token once and posts', async () => {
    const flow = await startSignup(['posts:write', 'agents:read'], 'scout');
    await page.goto(flow.verification_uri_complete);
    // Not signed in: the sign-in page first, then back to the code.
    await expect.poll(() => page.url()).toContain('/signin?next=');
    await page.getByLabel('Your name, as agents you approve will show it').fill('Ada Lovelace');
    await page.getByLabel('Password (8 characters or more)').fill('correct horse battery');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(/\/device\?user_code=/);
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Approve scout?');
    expect(await page.getByTestId('user-code').textContent()).toBe(flow.user_code);
    const body = (await page.textContent('main')) ?? '';
    expect(body).toContain('Post short messages to the room, shown with your name as the approving human.');
    expect(body).toContain('See the list of agents in the room and read their profiles.');
    expect(await poll(flow).then((r) => r.status)).toBe(202);

    await page.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Approved');

    clock.advance(SIGNUP_POLL_INTERVAL_SECONDS * 1000);
    const delivered = await poll(flow);
    expect(delivered.status).toBe(200);
    const { access_token: token, human } = (await delivered.json()) as { access_token: string; human: string };
    expect(human).toBe('Ada Lovelace');
    clock.advance(SIGNUP_POLL_INTERVAL_SECONDS * 1000);
    const again = (await (await poll(flow)).json()) as Problem;
    expect(again.type).toMatch(/\/problems\/signup-unknown$/);

    const created = await post(app, token, { text: 'approved by a human in a browser' });
    expect(created.status).toBe(201);
    await page.goto(`${app.urls.siteUrl}/`);
    const room = (await page.textContent('main')) ?? '';
    expect(room).toContain('approved by a human in a browser');
    expect(room).toContain('Ada Lovelace');
  });

  it('declines: the agent hears signup-declined', async () => {
    const flow = await startSignup(['posts:write'], 'unwanted');
    await page.goto(flow.verification_uri_complete);
    await page.getByRole('button', { name: 'Decline' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Declined');
    const problem = (await (await poll(flow)).json()) as Problem;
    expect(problem.type).toMatch(/\/problems\/signup-declined$/);
  });

  it('says so kindly when the human who answered a link opens it again, approved or declined; anyone else reads the usual refusal', async () => {
    const flow = await startSignup(['posts:write'], 'again');
    await page.goto(flow.verification_uri_complete);
    await page.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Approved');
    // The agent takes its token: the signup itself is gone.
    clock.advance(SIGNUP_POLL_INTERVAL_SECONDS * 1000);
    expect((await poll(flow)).status).toBe(200);
    const reopened = await page.goto(flow.verification_uri_complete);
    expect(reopened?.status()).toBe(200);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('You already approved again');
    expect(await page.getByRole('status').textContent()).toContain('you approved again');
    expect(await page.getByRole('alert').count()).toBe(0);
    // The approval's form sent again (from the history) reads the same, and approves nothing twice.
    const resent = await page.evaluate(async (userCode) => {
      const csrf = document.querySelector<HTMLInputElement>('input[name=csrf]')?.value ?? '';
      const response = await fetch('/device', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ csrf, user_code: userCode, decision: 'approve' }).toString(),
      });
      return { status: response.status, text: await response.text() };
    }, flow.user_code);
    expect(resent.status).toBe(200);
    expect(resent.text).toContain('You already approved again');

    const declined = await startSignup(['posts:write'], 'refused');
    await page.goto(declined.verification_uri_complete);
    await page.getByRole('button', { name: 'Decline' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Declined');
    await page.goto(declined.verification_uri_complete);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('You already declined refused');
    expect(await page.textContent('main')).toContain('refused gets no token');

    // Another human learns nothing about a code someone else answered.
    const stranger = await (await browser.newContext()).newPage();
    await stranger.goto(declined.verification_uri_complete);
    await stranger.getByLabel('Your name, as agents you approve will show it').fill('Someone Else');
    await stranger.getByLabel('Password (8 characters or more)').fill('correct horse battery');
    await stranger.getByRole('button', { name: 'Create account' }).click();
    await stranger.waitForURL(/\/device\?user_code=/);
    expect(await stranger.getByRole('alert').textContent()).toContain('No signup waits for this code');
    await stranger.context().close();
  });

  it('says a mistyped code is wrong without telling anything about other codes', async () => {
    await page.goto(`${app.urls.siteUrl}/device`);
    await page.getByLabel('Code').fill('BBBB-BBBB');
    await page.getByRole('button', { name: 'Continue' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('No signup waits for this code');
  });

  it("revokes from /account: the agent's next call is 401 token_invalid", async () => {
    const flow = await startSignup(['posts:write'], 'short-lived');
    await page.goto(flow.verification_uri_complete);
    await page.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Approved');
    clock.advance(SIGNUP_POLL_INTERVAL_SECONDS * 1000);
    const { access_token: token } = (await (await poll(flow)).json()) as { access_token: string };
    expect((await post(app, token, { text: 'still trusted' })).status).toBe(201);

    await page.goto(`${app.urls.siteUrl}/account`);
    const row = page.locator('li.agent').filter({ hasText: 'short-lived' });
    expect(await row.textContent()).toContain('posts:write');
    await row.getByRole('button', { name: /Revoke/ }).click();
    // Revoking asks first; only the confirmation revokes.
    await page.getByRole('button', { name: 'Revoke', exact: true }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Revoked');
    const refused = await post(app, token, { text: 'not any more' });
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as Problem).code).toBe('token_invalid');
  });

  it('completes a signup through POST {api_url}/agent/signup/complete from a signed-in page with its CSRF token', async () => {
    const flow = await startSignup(['agents:read'], 'scripted');
    await page.goto(`${app.urls.siteUrl}/account`);
    const answer = await page.evaluate(
      async ({ url, userCode }) => {
        const csrf = document.querySelector<HTMLInputElement>('input[name=csrf]')?.value ?? '';
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
          body: JSON.stringify({ user_code: userCode, human_label: 'Ada' }),
        });
        return { status: response.status, body: (await response.json()) as unknown };
      },
      { url: `${app.urls.apiUrl}/agent/signup/complete`, userCode: flow.user_code },
    );
    expect(answer).toEqual({ status: 200, body: { status: 'approved', agent_name: 'scripted', human: 'Ada Lovelace' } });
    const delivered = (await (await poll(flow)).json()) as { status: string; scopes: string[] };
    expect(delivered).toMatchObject({ status: 'completed', scopes: ['agents:read'] });
  });

  it('refuses a form POST without its CSRF token, and completeSignup from an agent', async () => {
    const flow = await startSignup(['posts:write'], 'forged');
    const status = await page.evaluate(async (userCode) => {
      const response = await fetch('/device', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `user_code=${userCode}&decision=approve`,
      });
      return response.status;
    }, flow.user_code);
    expect(status).toBe(400);
    const withoutHeader = await page.evaluate(async (url) => {
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user_code: 'XXXX' }) });
      return response.status;
    }, `${app.urls.apiUrl}/agent/signup/complete`);
    expect(withoutHeader).toBe(400);
    const agent = await fetch(`${app.urls.apiUrl}/agent/signup/complete`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer agt_whatever' },
      body: JSON.stringify({ user_code: flow.user_code }),
    });
    expect(agent.status).toBe(403);
    expect(((await agent.json()) as Problem).detail).toContain('never approves');
    expect(await poll(flow).then((r) => r.status)).toBe(202);
  });
});
