import { freePort } from '@agentroom/kit/local';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { post, type Problem, signUp } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';

interface Flow {
  device_code: string;
  user_code: string;
  verification_uri_complete: string;
}

/** The narrowest phone the human pages are made for. */
const PHONE = { width: 360, height: 740 };
/** 100 code points (the most an agent name may have) and no place a line could break. */
const LONG_NAME = 'ResearchAssistantForTheQuarterlyPlanningMeetingNotesSummariesAndFollowUpsOfTheWholeTeamV2Build0042';
/** A human's display name with no break either. */
const LONG_HUMAN = 'AdaAugustaKingCountessOfLovelaceAndFirstProgrammer';

describe('the human pages on a 360 px wide phone, in a real browser', () => {
  let app: Embedded;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const human = { name: LONG_HUMAN, password: 'correct horse battery' };

  const startSignup = async (scopes: string[], agentName: string): Promise<Flow> =>
    (await (
      await fetch(`${app.urls.apiUrl}/agent/signup/start`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ scopes, agent_name: agentName }),
      })
    ).json()) as Flow;

  /** The page's width against the viewport's, and what sticks out when it is wider. */
  async function expectNoOverflow(what: string): Promise<void> {
    const measured = await page.evaluate(() => {
      const limit = document.documentElement.clientWidth;
      const wide = Array.from(document.querySelectorAll('body *'))
        .filter((element) => element.getBoundingClientRect().right > limit + 0.5)
        .map((element) => `<${element.tagName.toLowerCase()}${element.id ? `#${element.id}` : ''}> right=${Math.round(element.getBoundingClientRect().right)}`)
        .slice(0, 5);
      return { scrollWidth: document.documentElement.scrollWidth, wide };
    });
    expect({ what, ...measured }).toEqual({ what, scrollWidth: measured.scrollWidth, wide: [] });
    expect(measured.scrollWidth, `${what}: ${page.url()}`).toBeLessThanOrEqual(PHONE.width);
  }

  /**
   * The ids and times of the page that a line break cuts in two, or that fill more than a line: none
   * should (an id too long for its line is cut with an ellipsis, and whole in its title).
   */
  function unbroken(): Promise<string[]> {
    return page.evaluate(() =>
      Array.from(document.querySelectorAll<HTMLElement>('main .id, main time'))
        .filter(
          (element) =>
            element.getClientRects().length !== 1 || element.getBoundingClientRect().height > Number.parseFloat(getComputedStyle(element).fontSize) * 2,
        )
        .map((element) => element.outerHTML),
    );
  }

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    browser = await launchChromium();
    context = await browser.newContext({ viewport: PHONE });
    page = await context.newPage();
  }, 60_000);

  afterAll(async () => {
    await browser.close();
    await app.stop();
  });

  it('signs in and approves an agent with a 100-character name: /signin, /device and its approval screen fit in 360 px', async () => {
    await page.goto(`${app.urls.siteUrl}/signin`);
    expect(await page.evaluate(() => window.innerWidth)).toBe(PHONE.width);
    await expectNoOverflow('/signin');

    // A wrong password shows the sign-in page again with its error, the name as typed, the password empty.
    await page.getByLabel('Name', { exact: true }).fill('nobody-here');
    await page.getByLabel('Password', { exact: true }).fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('do not match');
    expect(await page.getByLabel('Name', { exact: true }).inputValue()).toBe('nobody-here');
    expect(await page.getByLabel('Password', { exact: true }).inputValue()).toBe('');
    await expectNoOverflow('/signin with an error');

    const flow = await startSignup(['posts:write', 'agents:read', 'messages:read', 'messages:write'], LONG_NAME);
    await page.goto(flow.verification_uri_complete);
    await expect.poll(() => page.url()).toContain('/signin?next=');
    await page.getByLabel('Your name, as agents you approve will show it').fill(human.name);
    await page.getByLabel('Password (8 characters or more)').fill(human.password);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(/\/device\?user_code=/);
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe(`Approve ${LONG_NAME}?`);
    await expectNoOverflow('/device approval screen');

    await page.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Approved');
    await expectNoOverflow('/device approved');

    await page.goto(`${app.urls.siteUrl}/device`);
    await expectNoOverflow('/device');
    await page.getByLabel('Code').fill('BBBB-BBBB');
    await page.getByRole('button', { name: 'Continue' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('No signup waits for this code');
    await expectNoOverflow('/device with a wrong code');
  });

  it('lists several agents on /account, one with a 100-character name, within 360 px; the revoke confirmation fits too', async () => {
    for (const name of ['scout', 'a second agent with a rather long name that wraps', 'notes']) {
      await signUp(app, ['posts:write', 'messages:read'], name, human);
    }
    await page.goto(`${app.urls.siteUrl}/account`);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Your agents');
    const rows = page.locator('li.agent').filter({ has: page.getByRole('button', { name: /Revoke/ }) });
    expect(await rows.count()).toBe(4);
    expect(await rows.filter({ hasText: LONG_NAME }).textContent()).toContain('messages:write');
    await expectNoOverflow('/account');
    expect(await unbroken(), 'ids and times on /account').toEqual([]);

    await rows
      .filter({ hasText: LONG_NAME })
      .getByRole('button', { name: /Revoke/ })
      .click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe(`Revoke ${LONG_NAME}?`);
    await expectNoOverflow('/account/revoke confirmation');
    await page.getByRole('link', { name: 'Keep it' }).click();
    await page.waitForURL(/\/account$/);
  });

  it('asks before revoking: "Keep it" leaves the token working, "Revoke" stops it at once; both by keyboard', async () => {
    const { token } = await signUp(app, ['posts:write'], 'careful', human);
    expect((await post(app, token, { text: 'before anything' })).status).toBe(201);

    await page.goto(`${app.urls.siteUrl}/account`);
    const row = page.locator('li.agent').filter({ hasText: 'careful' });
    const revoke = row.getByRole('button', { name: 'Revoke the token of careful' });
    await revoke.focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Revoke careful?');
    expect(await page.textContent('main')).toContain('It stops working at once.');
    // Showing the question revoked nothing.
    expect((await post(app, token, { text: 'asked, not revoked' })).status).toBe(201);
    const confirm = page.getByRole('button', { name: 'Revoke', exact: true });
    const keep = page.getByRole('link', { name: 'Keep it' });
    expect(await confirm.count()).toBe(1);
    expect(await keep.count()).toBe(1);
    await confirm.focus();
    await page.keyboard.press('Tab');
    expect(await keep.evaluate((element) => element === document.activeElement)).toBe(true);
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/account$/);
    expect(await page.locator('li.agent').filter({ hasText: 'careful' }).count()).toBe(1);
    expect((await post(app, token, { text: 'kept' })).status).toBe(201);

    await page
      .locator('li.agent')
      .filter({ hasText: 'careful' })
      .getByRole('button', { name: /Revoke/ })
      .click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Revoke careful?');
    await page.getByRole('button', { name: 'Revoke', exact: true }).focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Revoked');
    expect(await page.locator('li.agent').filter({ hasText: 'careful' }).count()).toBe(0);
    await expectNoOverflow('/account after revoking');
    const refused = await post(app, token, { text: 'not any more' });
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as Problem).code).toBe('token_invalid');
  });

  it('checks the CSRF token on both steps: asking and confirming', async () => {
    const { token } = await signUp(app, ['posts:write'], 'guarded', human);
    await page.goto(`${app.urls.siteUrl}/account`);
    const tokenId = await page.locator('li.agent').filter({ hasText: 'guarded' }).locator('input[name=token_id]').getAttribute('value');
    expect(tokenId).toMatch(/./);
    const answers = await page.evaluate(async (id) => {
      const send = async (body: string): Promise<number> =>
        (await fetch('/account/revoke', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body })).status;
      return {
        askWithout: await send(`token_id=${encodeURIComponent(id ?? '')}`),
        confirmWithout: await send(`token_id=${encodeURIComponent(id ?? '')}&confirm=yes`),
        confirmWrong: await send(`token_id=${encodeURIComponent(id ?? '')}&confirm=yes&csrf=forged`),
      };
    }, tokenId);
    expect(answers).toEqual({ askWithout: 400, confirmWithout: 400, confirmWrong: 400 });
    expect((await post(app, token, { text: 'still here' })).status).toBe(201);

    // The confirmation form carries the session's CSRF token; asking about a token of nobody's is not found.
    await page
      .locator('li.agent')
      .filter({ hasText: 'guarded' })
      .getByRole('button', { name: /Revoke/ })
      .click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Revoke guarded?');
    const form = page.locator('main form');
    expect(await form.locator('input[name=csrf]').getAttribute('value')).toBe(await page.locator('header input[name=csrf]').getAttribute('value'));
    expect(await form.locator('input[name=confirm]').getAttribute('value')).toBe('yes');
    const unknown = await page.evaluate(async () => {
      const csrf = document.querySelector<HTMLInputElement>('input[name=csrf]')?.value ?? '';
      return (
        await fetch('/account/revoke', {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: `csrf=${encodeURIComponent(csrf)}&token_id=tok_nothing`,
        })
      ).status;
    });
    expect(unknown).toBe(404);
    expect((await post(app, token, { text: 'still here' })).status).toBe(201);
  });
});
