import { freePort } from '@agentroom/kit/local';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { post, signUp } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { MovableClock } from '../support/clock.js';
import { FAST_PASSWORDS } from '../support/env.js';

/** What /account lists on one page, in each of its lists. */
const PAGE_SIZE = 50;

/**
 * /account in a real browser for a human with many agents: the ones approved one by one in pages of
 * 50, newest first; the ones an operator provisioned (a load test's thousands) folded into one
 * group with their count and pages of their own; and a page that stays small whatever the count.
 */
describe('/account with many agents, in a real browser', () => {
  let app: Embedded;
  let browser: Browser;
  let page: Page;
  const human = { name: 'Grace Many', password: 'correct horse battery' };
  /** The approved agents' names, oldest first. */
  const approved: string[] = [];
  /** The provisioned agents' ids, oldest first. */
  const provisioned: string[] = [];
  let firstToken = '';
  /** Auth's clock, moved on a millisecond after each agent, so that "newest first" is one order the test can name. */
  const clock = new MovableClock();

  /** The agents listed in `scope`, by their visible name. */
  async function agentNames(scope: ReturnType<Page['locator']>): Promise<string[]> {
    return scope.locator('li.agent h3').allTextContents();
  }

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '1000000' }, undefined, { clock });
    // 55 approved one by one: a full page and 5 more.
    for (let i = 1; i <= PAGE_SIZE + 5; i += 1) {
      const name = `approved-${String(i).padStart(2, '0')}`;
      const { token } = await signUp(app, ['posts:write'], name, human);
      if (i === 1) firstToken = token;
      approved.push(name);
      clock.advance(1);
    }
    browser = await launchChromium();
    page = await (await browser.newContext()).newPage();
    await page.goto(`${app.urls.siteUrl}/signin`);
    await page.getByLabel('Name', { exact: true }).fill(human.name);
    await page.getByLabel('Password', { exact: true }).fill(human.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/account$/);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
  });

  it('lists the approved agents 50 to a page, newest first, with a link to the older ones and back to the newest', async () => {
    await page.goto(`${app.urls.siteUrl}/account`);
    const list = page.locator('#approved');
    expect(await agentNames(list)).toEqual([...approved].reverse().slice(0, PAGE_SIZE));
    const pager = page.getByRole('navigation', { name: 'Pages of the agents you approved' });
    expect(await pager.textContent()).toContain('1 to 50 of 55, newest first');
    expect(await pager.getByRole('link', { name: 'Newest' }).count()).toBe(0);

    await pager.getByRole('link', { name: 'Older' }).click();
    await page.waitForURL(/\/account\?approved=/);
    expect(await agentNames(list)).toEqual([...approved].reverse().slice(PAGE_SIZE));
    expect(await pager.textContent()).toContain('51 to 55 of 55, newest first');
    expect(await pager.getByRole('link', { name: 'Older' }).count()).toBe(0);

    // Revoking from the second page works as on the first: the question, the CSRF token, the answer.
    await page.locator('li.agent').filter({ hasText: 'approved-01' }).getByRole('button', { name: 'Revoke the token of approved-01' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Revoke approved-01?');
    await page.getByRole('button', { name: 'Revoke', exact: true }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Revoked');
    expect((await post(app, firstToken, { text: 'after the revoke' })).status).toBe(401);
    expect(await pager.textContent()).toContain('1 to 50 of 54, newest first');

    await pager.getByRole('link', { name: 'Older' }).click();
    expect(await agentNames(list)).toEqual([...approved].reverse().slice(PAGE_SIZE, -1));
    await pager.getByRole('link', { name: 'Newest' }).click();
    await page.waitForURL(/\/account$/);
    expect((await agentNames(list))[0]).toBe('approved-55');
  });

  it('folds 2,000 provisioned agents into one group with their count, apart from the approved ones, with pages of their own', async () => {
    // As `npm run agents -- provision --count 2000` makes them, through auth's own provisioning.
    for (let i = 1; i <= 2_000; i += 1) {
      const agent = await app.auth.flows.provision({ humanName: human.name, agentName: `load-${i}`, scopes: ['posts:write'], reason: 'k6 load test' });
      provisioned.push(agent.agentId);
      clock.advance(1);
    }
    await page.goto(`${app.urls.siteUrl}/account`);
    // The approved agents stay where they were, the first thing on the page.
    expect(await agentNames(page.locator('#approved'))).toEqual([...approved].reverse().slice(0, PAGE_SIZE));
    const group = page.locator('details#provisioned');
    const summary = group.locator('summary');
    expect(await summary.textContent()).toBe('Provisioned by an operator: 2,000 agents');
    // Folded: its rows are not shown until the human opens it.
    expect(await group.getAttribute('open')).toBeNull();
    expect(await group.locator('li.agent').count()).toBe(PAGE_SIZE);
    expect(await group.locator('li.agent').first().isVisible()).toBe(false);

    await summary.click();
    const rows = group.locator('li.agent');
    expect(await rows.count()).toBe(PAGE_SIZE);
    expect(await agentNames(group)).toEqual(Array.from({ length: PAGE_SIZE }, (_, i) => `load-${2_000 - i}`));
    expect(await rows.first().textContent()).toContain('Provisioned by an operator: k6 load test');
    const pager = group.getByRole('navigation', { name: 'Pages of the provisioned agents' });
    expect(await pager.textContent()).toContain('1 to 50 of 2,000, newest first');

    await pager.getByRole('link', { name: 'Older' }).click();
    await page.waitForURL(/\/account\?provisioned=.*#provisioned$/);
    // Open on its second page; the approved list is still on its first.
    expect(await group.getAttribute('open')).toBe('');
    expect(await agentNames(group)).toEqual(Array.from({ length: PAGE_SIZE }, (_, i) => `load-${1_950 - i}`));
    expect(await pager.textContent()).toContain('51 to 100 of 2,000, newest first');
    expect((await agentNames(page.locator('#approved')))[0]).toBe('approved-55');
    // The group and its pager fit the narrowest phone the pages are made for, as the rest of the page does.
    await page.setViewportSize({ width: 360, height: 740 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    await page.setViewportSize({ width: 1280, height: 720 });

    // A provisioned agent is revoked from its group as any other.
    await group.getByRole('button', { name: 'Revoke the token of load-1950' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Revoke load-1950?');
    await page.getByRole('button', { name: 'Revoke', exact: true }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Revoked');
    expect(await summary.textContent()).toBe('Provisioned by an operator: 1,999 agents');
  }, 120_000);

  it('stays small with 2,000 provisioned agents: two pages of 50 rows, not a row per agent', async () => {
    expect(provisioned.length).toBe(2_000);
    const cookies = await page.context().cookies();
    const cookie = cookies.map((c) => `${c.name}=${c.value}`).join('; ');
    const answer = await fetch(`${app.urls.siteUrl}/account`, { headers: { cookie } });
    expect(answer.status).toBe(200);
    const bytes = (await answer.arrayBuffer()).byteLength;
    // About 750 bytes a row (its name links to its own page): 100 rows and the page around them. Every agent on one page was some 1.5 MB here.
    expect(bytes).toBeLessThan(110_000);
  });

  it("offers on the room's page the human's own agents, then the newest 50 provisioned ones in a group saying how many, and posts as one of them", async () => {
    await page.goto(`${app.urls.siteUrl}/`);
    const select = page.getByLabel('Post as');
    // The agents of the newest 50 of 54 approvals (approved-01 was revoked above), in a group that says so.
    const own = select.locator('optgroup').first();
    expect(await own.getAttribute('label')).toBe('Yours: from your newest 50 approvals of 54');
    expect(await own.locator('option').allTextContents()).toEqual([...approved].reverse().slice(0, PAGE_SIZE));
    const group = select.locator('optgroup').last();
    expect(await group.getAttribute('label')).toBe('Provisioned by an operator: the newest 50 of 1,999');
    // load-1950 was revoked above: the newest 50 live ones are load-2000 to load-1951.
    expect(await group.locator('option').allTextContents()).toEqual(Array.from({ length: PAGE_SIZE }, (_, i) => `load-${2_000 - i}`));
    const cookie = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    // Two thousand agents were an option each here (about 100 KB of page); now a hundred.
    expect((await (await fetch(`${app.urls.siteUrl}/`, { headers: { cookie } })).arrayBuffer()).byteLength).toBeLessThan(30_000);

    await select.selectOption({ label: 'load-1990' });
    await page.getByLabel('Text (1 to 500 characters)').fill('a provisioned agent, from the room page');
    await page.getByRole('button', { name: 'Post' }).click();
    await page.waitForURL(/#post-/);
    const id = new URL(page.url()).hash.slice('#post-'.length);
    expect(await page.locator(`#post-${id} .meta`).textContent()).toContain('load-1990 for Grace Many · from the web page');
  });
});
