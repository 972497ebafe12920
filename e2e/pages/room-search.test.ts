import AxeBuilder from '@axe-core/playwright';
import { freePort } from '@agentroom/kit/local';
import { until } from '@agentroom/testkit';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { post, signUp } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { FAST_PASSWORDS } from '../support/env.js';

interface PostBody {
  id: string;
  text: string;
}

/** The smallest retention there is: the thread below is older than the room keeps. */
const RETENTION = 50;
const ada = { name: 'Ada Search', password: 'correct horse battery' };

describe("the room page's search, in a real browser", () => {
  let app: Embedded;
  let browser: Browser;
  let root: PostBody;
  let reply: PostBody;
  const contexts: BrowserContext[] = [];

  async function open(javaScriptEnabled: boolean): Promise<Page> {
    const context = await browser.newContext({ javaScriptEnabled });
    contexts.push(context);
    return context.newPage();
  }

  /** Serious or critical accessibility violations of the page as it is now. */
  async function violations(page: Page): Promise<string[]> {
    const axe = await new AxeBuilder({ page }).analyze();
    return axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.help}`);
  }

  beforeAll(async () => {
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '1000000',
      POSTS_RETENTION: String(RETENTION),
    });
    const { token } = await signUp(app, ['posts:write'], 'archivist', ada);
    const create = async (body: Record<string, string>): Promise<PostBody> => {
      const response = await post(app, token, body);
      expect(response.status).toBe(201);
      return (await response.json()) as PostBody;
    };
    root = await create({ text: 'The <b>tide tables</b> for the northern harbour are in the blue folder.' });
    reply = await create({ text: 'And the tide tables for the southern one?', reply_to: root.id });
    for (let i = 1; i <= RETENTION + 10; i += 1) await create({ text: `filler ${i}` });
    await until('the record holds every post', async () => {
      const found = await fetch(`${app.urls.baseUrl}/posts/search?q=${encodeURIComponent(`"filler ${RETENTION + 10}"`)}`);
      return found.status === 200 && ((await found.json()) as { data: unknown[] }).data.length === 1;
    });
    browser = await launchChromium();
  }, 90_000);

  afterAll(async () => {
    await Promise.all(contexts.map((context) => context.close()));
    await browser?.close();
    await app?.stop();
  });

  it.each([false, true])(
    'finds a post older than the room keeps from the search box (JavaScript %s), marks what matched, and links it in its thread',
    async (javaScriptEnabled) => {
      const page = await open(javaScriptEnabled);
      const errors: string[] = [];
      page.on('console', (message) => {
        if (message.type() === 'error') errors.push(message.text());
      });
      await page.goto(`${app.urls.siteUrl}/`);
      // The thread is no longer among the recent posts.
      expect(await page.locator('#posts li.post .text').allTextContents()).not.toContain(root.text);
      await page.getByRole('searchbox', { name: 'Search the room' }).fill('"tide tables" northern');
      await page.getByRole('button', { name: 'Search' }).click();
      await page.waitForURL(/\?q=/);
      await page.getByRole('heading', { name: /Posts matching/ }).waitFor();
      const hits = page.locator('ol.hits li.hit');
      expect(await hits.count()).toBe(1);
      const marks = (await hits.first().locator('mark').allTextContents()).map((text) => text.toLowerCase());
      // The phrase is one range, the word another.
      expect(marks).toEqual(['tide tables', 'northern']);
      // The text is text: the markup a post holds is shown, never parsed.
      expect(await hits.first().locator('.text b').count()).toBe(0);
      expect(await hits.first().locator('.text').textContent()).toContain('<b>');
      // The query stays in the box, to refine it.
      expect(await page.getByRole('searchbox', { name: 'Search the room' }).inputValue()).toBe('"tide tables" northern');
      // axe runs in the page: only where scripts may run.
      if (javaScriptEnabled) expect(await violations(page)).toEqual([]);

      await hits.first().getByRole('link').click();
      await page.getByRole('heading', { name: 'A thread' }).waitFor();
      expect(page.url()).toContain(`#post-${root.id}`);
      const thread = page.locator('ul.thread');
      expect(await thread.locator(`#post-${root.id} > .text`).textContent()).toBe(root.text);
      expect(await thread.locator(`#post-${reply.id} .text`).textContent()).toBe(reply.text);
      if (javaScriptEnabled) {
        // The post the hit named is the one the page points at.
        expect(await page.evaluate(() => document.querySelector(':target')?.id)).toBe(`post-${root.id}`);
        expect(await violations(page)).toEqual([]);
      }
      expect(errors).toEqual([]);
    },
  );

  it('says plainly when nothing matches, when a query is refused (400) and when a thread is unknown (404)', async () => {
    const page = await open(false);
    const none = await page.goto(`${app.urls.siteUrl}/?q=${encodeURIComponent('zeppelin')}`);
    expect(none?.status()).toBe(200);
    await page.getByText('No post matches.').waitFor();
    const tooLong = await page.goto(`${app.urls.siteUrl}/?q=${'x'.repeat(300)}`);
    expect(tooLong?.status()).toBe(400);
    expect(await page.getByRole('alert').textContent()).toContain('q');
    const unknown = await page.goto(`${app.urls.siteUrl}/?thread=1-0`);
    expect(unknown?.status()).toBe(404);
    expect(await page.getByRole('alert').textContent()).toContain('No post');
  });
});
