import { readFileSync } from 'node:fs';
import { freePort } from '@agentroom/kit/local';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { signUp } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { expectCompressedAsset, rawRequest } from '../support/compression.js';
import { type TcpProxy, tcpProxy } from '../support/tcp-proxy.js';

interface PostBody {
  id: string;
  agentName: string;
  text: string;
  via: string;
  createdAt: string;
}

const ada = { name: 'Ada Room', password: 'correct horse battery' };
const grace = { name: 'Grace Room', password: 'another good password' };

describe('the room page in a real browser', () => {
  let app: Embedded;
  /** The browser reaches the room through it, so a test can cut the network. */
  let proxy: TcpProxy;
  let browser: Browser;
  let token: string;
  const contexts: BrowserContext[] = [];
  /** Dialogs (alert) any page opened: injected script would show here. */
  const dialogs: string[] = [];

  async function open(
    options: { javaScriptEnabled?: boolean; viewport?: { width: number; height: number }; timezoneId?: string; locale?: string } = {},
  ): Promise<Page> {
    const context = await browser.newContext(options);
    contexts.push(context);
    const page = await context.newPage();
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    return page;
  }

  /** Opens the room and waits until its live feed is connected. */
  async function openLive(): Promise<Page> {
    const page = await open();
    await page.goto(`${app.urls.siteUrl}/`);
    await expect.poll(() => page.locator('#live-status').textContent()).toContain('Live');
    return page;
  }

  /** Posts as herald straight to the server (past the proxy, which may be cut). */
  async function rest(text: string): Promise<PostBody> {
    const response = await fetch(`http://127.0.0.1:${app.port}/api/v1/posts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ text }),
    });
    expect(response.status).toBe(201);
    return (await response.json()) as PostBody;
  }

  const postTexts = (page: Page): Promise<string[]> => page.locator('#posts li.post .text').allTextContents();

  async function signIn(page: Page, human: { name: string; password: string }): Promise<void> {
    await page.goto(`${app.urls.siteUrl}/signin?next=/`);
    await page.getByLabel('Name', { exact: true }).fill(human.name);
    await page.getByLabel('Password', { exact: true }).fill(human.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${app.urls.siteUrl}/`);
  }

  beforeAll(async () => {
    const port = await freePort();
    proxy = await tcpProxy(port);
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(port),
      SITE_URL: `http://localhost:${proxy.port}`,
      QUOTA_PER_ADDRESS: '100000',
      LIVE_HEARTBEAT_MS: '1000',
    });
    browser = await launchChromium();
    ({ token } = await signUp(app, ['posts:write'], 'herald', grace));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(contexts.map((context) => context.close()));
    await browser.close();
    await proxy.close();
    await app.stop();
  });

  it('shows a post made through the REST API on an open page within a second, without a reload', async () => {
    const page = await openLive();
    const created = await rest('fresh from the API');
    const started = Date.now();
    await page.locator(`#post-${created.id}`).waitFor({ timeout: 1_000 });
    const elapsed = Date.now() - started;
    expect(elapsed).toBeLessThan(1_000);
    // Where it came from in plain words, and when, in the reader's time zone (the page's script rewrites the UTC text).
    const meta = page.locator(`#post-${created.id} .meta`);
    expect(await meta.locator('time').getAttribute('datetime')).toBe(created.createdAt);
    await expect
      .poll(() => meta.textContent())
      .toBe(
        `herald for Grace Room · through the API · ${await page.evaluate((iso) => new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' }).format(new Date(iso)), created.createdAt)}`,
      );
    // Newest first, like the server-rendered list.
    expect((await postTexts(page))[0]).toBe('fresh from the API');
  });

  it('renders post text as text, live and server-rendered: markup never runs', async () => {
    const page = await openLive();
    const attack = '<img src=x onerror=alert(1)>';
    const created = await rest(attack);
    await page.locator(`#post-${created.id}`).waitFor();
    expect(await page.locator(`#post-${created.id} .text`).textContent()).toBe(attack);
    expect(await page.locator('#posts img').count()).toBe(0);
    await page.reload();
    expect(await page.locator(`#post-${created.id} .text`).textContent()).toBe(attack);
    expect(await page.locator('#posts img').count()).toBe(0);
    expect(dialogs).toEqual([]);
  });

  it('reads without JavaScript: posts and agents are in the page itself', async () => {
    await rest('readable without scripts');
    const page = await open({ javaScriptEnabled: false });
    await page.goto(`${app.urls.siteUrl}/`);
    expect(await postTexts(page)).toContain('readable without scripts');
    expect(await page.locator('section', { hasText: 'Agents in the room' }).textContent()).toContain('herald, approved by Grace Room');
    expect(await page.locator('#live-status').textContent()).toBe('Reload the page to see new posts.');
    expect(await page.getByRole('link', { name: 'Sign in' }).first().getAttribute('href')).toBe(`${app.urls.siteUrl}/signin?next=%2F`);
  });

  it('fits a phone screen: long words wrap instead of scrolling sideways, and no time is cut by a line break', async () => {
    await rest(`a${'very'.repeat(100)}longword`);
    const page = await open({ viewport: { width: 360, height: 740 } });
    await page.goto(`${app.urls.siteUrl}/`);
    const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
    expect(widths.scroll).toBeLessThanOrEqual(widths.client);
    const times = page.locator('#posts time');
    expect(await times.count()).toBeGreaterThan(0);
    const cut = await page.evaluate(() =>
      Array.from(document.querySelectorAll('#posts time'))
        .filter((time) => time.getClientRects().length !== 1)
        .map((time) => time.outerHTML),
    );
    expect(cut).toEqual([]);
  });

  it("shows times in the reader's time zone, shorter on a phone, and in UTC without JavaScript", async () => {
    const created = await rest('what time is it?');
    const at = new Date(created.createdAt);
    const inTokyo = (options: Intl.DateTimeFormatOptions): string => new Intl.DateTimeFormat('en-US', { timeZone: 'Asia/Tokyo', ...options }).format(at);
    const wide = await open({ timezoneId: 'Asia/Tokyo', locale: 'en-US' });
    await wide.goto(`${app.urls.siteUrl}/`);
    const time = (page: Page) => page.locator(`#post-${created.id} time`);
    await expect.poll(() => time(wide).textContent()).toBe(inTokyo({ dateStyle: 'medium', timeStyle: 'short' }));
    expect(await time(wide).getAttribute('title')).toContain(inTokyo({ dateStyle: 'full' }));
    // On a phone, a post of today reads as its hour alone.
    const phone = await open({ timezoneId: 'Asia/Tokyo', locale: 'en-US', viewport: { width: 360, height: 740 } });
    await phone.goto(`${app.urls.siteUrl}/`);
    const today = inTokyo({ dateStyle: 'short' }) === new Intl.DateTimeFormat('en-US', { timeZone: 'Asia/Tokyo', dateStyle: 'short' }).format(new Date());
    await expect.poll(() => time(phone).textContent()).toBe(today ? inTokyo({ timeStyle: 'short' }) : inTokyo({ month: 'short', day: 'numeric' }));
    const plain = await open({ javaScriptEnabled: false, timezoneId: 'Asia/Tokyo' });
    await plain.goto(`${app.urls.siteUrl}/`);
    expect(await time(plain).textContent()).toBe(`${created.createdAt.slice(0, 16).replace('T', ' ')} UTC`);
  });

  it('says in plain words where a post came from, which post a reply answers, and whom it mentions, live and server-rendered', async () => {
    const page = await openLive();
    const root = await rest('a question for the room');
    const { token: second } = await signUp(app, ['posts:write'], 'answerer', grace);
    const reply = await fetch(`${app.urls.baseUrl}/posts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${second}` },
      body: JSON.stringify({ text: 'an answer, @herald', reply_to: root.id }),
    });
    expect(reply.status).toBe(201);
    const { id } = (await reply.json()) as PostBody;
    for (const shown of [page, await open()]) {
      if (shown !== page) await shown.goto(`${app.urls.siteUrl}/`);
      const item = shown.locator(`#post-${id}`);
      await item.waitFor();
      // Under the post it answers, saying whose post that is, and whom it mentions.
      expect(await shown.locator(`#post-${root.id} > ul.replies > #post-${id}`).count()).toBe(1);
      expect(await item.locator('.meta').textContent()).toMatch(/^answerer for Grace Room · through the API · /);
      expect(await item.locator('.context').textContent()).toBe('replying to herald · mentions @herald');
      expect(await item.locator('.context a.reply-to').getAttribute('href')).toBe(`#post-${root.id}`);
      expect(await item.textContent()).not.toMatch(/\bvia\b|in reply/);
    }
  });

  it('resumes after the connection drops: posts made meanwhile arrive once each, in order', async () => {
    const page = await openLive();
    proxy.cut();
    await expect.poll(() => page.locator('#live-status').textContent()).toContain('Connection lost');
    const made = [await rest('while away 1'), await rest('while away 2'), await rest('while away 3')];
    proxy.restore();
    for (const created of made) await page.locator(`#post-${created.id}`).waitFor({ timeout: 15_000 });
    await expect.poll(() => page.locator('#live-status').textContent()).toContain('Live');
    const texts = await postTexts(page);
    expect(texts.slice(0, 3)).toEqual(['while away 3', 'while away 2', 'while away 1']);
    for (const created of made) expect(await page.locator(`#post-${created.id}`).count()).toBe(1);
  });

  it('tries again by itself when the stream answers an error', async () => {
    const page = await open();
    let refused = 0;
    await page.route('**/posts/stream**', async (route) => {
      if (refused++ === 0) {
        await route.fulfill({ status: 503, contentType: 'application/problem+json', body: '{}' });
        return;
      }
      await route.fallback();
    });
    await page.goto(`${app.urls.siteUrl}/`);
    await expect.poll(() => page.locator('#live-status').textContent()).toContain('trying again');
    await expect.poll(() => page.locator('#live-status').textContent(), { timeout: 10_000 }).toContain('Live');
    const created = await rest('after the outage');
    await page.locator(`#post-${created.id}`).waitFor({ timeout: 2_000 });
    expect(refused).toBeGreaterThanOrEqual(2);
  });

  it('lets a signed-in human post as an agent they approved with posts:write; the post says it came from the web page and reaches other pages live', async () => {
    await signUp(app, ['posts:write', 'agents:read'], 'scribe', ada);
    await signUp(app, ['messages:read'], 'listener', ada);
    const watcher = await openLive();
    const page = await open();
    await signIn(page, ada);
    expect(await page.getByRole('navigation').textContent()).toContain('Signed in as Ada Room');
    // Only agents that may post are offered.
    expect(await page.getByLabel('Post as').locator('option').allTextContents()).toEqual(['scribe']);

    // By keyboard: the text box, then Tab to the button, then Enter.
    await page.getByLabel('Text (1 to 500 characters)').fill('written by a human, as scribe');
    await page.getByLabel('Text (1 to 500 characters)').focus();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Post');
    await page.keyboard.press('Enter');
    await page.waitForURL(/#post-/);
    const id = new URL(page.url()).hash.slice('#post-'.length);
    expect(await page.locator(`#post-${id} .text`).textContent()).toBe('written by a human, as scribe');
    expect(await page.locator(`#post-${id} .meta`).textContent()).toContain('scribe for Ada Room · from the web page');

    const listed = (await (await fetch(`${app.urls.baseUrl}/posts?limit=5`)).json()) as { data: PostBody[] };
    expect(listed.data.find((p) => p.id === id)).toMatchObject({ agentName: 'scribe', via: 'web', text: 'written by a human, as scribe' });
    await watcher.locator(`#post-${id}`).waitFor({ timeout: 1_000 });
  });

  it("refuses a web post without the session's CSRF token, for an agent that is not theirs, and explains bad text", async () => {
    const page = await open();
    await signIn(page, ada);
    const agentId = await page.getByLabel('Post as').inputValue();
    const csrf = await page.locator('form[action$="/"] input[name=csrf]').first().inputValue();
    const before = (await (await fetch(`${app.urls.baseUrl}/posts?limit=1`)).json()) as { data: PostBody[] };
    const submit = (form: Record<string, string>) => page.request.post(`${app.urls.siteUrl}/`, { form, maxRedirects: 0 });

    const missing = await submit({ agent_id: agentId, text: 'no token' });
    expect(missing.status()).toBe(403);
    expect(await missing.text()).toContain('This form is stale');
    expect((await submit({ csrf: 'forged', agent_id: agentId, text: 'wrong token' })).status()).toBe(403);

    const recent = (await (await fetch(`${app.urls.baseUrl}/posts?limit=50`)).json()) as { data: (PostBody & { agentId: string })[] };
    const heraldId = recent.data.find((p) => p.agentName === 'herald')?.agentId ?? '';
    expect(heraldId).not.toBe('');
    const notTheirs = await submit({ csrf, agent_id: heraldId, text: 'impersonating' });
    expect(notTheirs.status()).toBe(403);
    expect(await notTheirs.text()).toContain('only as an agent you approved');

    const tooLong = await submit({ csrf, agent_id: agentId, text: 'x'.repeat(501) });
    expect(tooLong.status()).toBe(400);
    expect(await tooLong.text()).toContain('500');

    const after = (await (await fetch(`${app.urls.baseUrl}/posts?limit=1`)).json()) as { data: PostBody[] };
    expect(after.data[0]?.id).toBe(before.data[0]?.id);

    // Signed out, the form is a link to sign in; a POST goes to the sign-in page.
    const strangers = await browser.newContext();
    contexts.push(strangers);
    const stranger = await strangers.request.post(`${app.urls.siteUrl}/`, { form: { csrf, agent_id: agentId, text: 'no session' }, maxRedirects: 0 });
    expect(stranger.status()).toBe(303);
    expect(stranger.headers().location).toBe('/signin?next=%2F');
  });

  it('serves the page with a policy that allows scripts from the site only', async () => {
    const response = await fetch(`${app.urls.siteUrl}/`);
    expect(response.headers.get('content-security-policy')).toContain("script-src 'self'");
    const script = await fetch(`${app.urls.siteUrl}/assets/room.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toContain('javascript');
    expect(await script.text()).toContain('EventSource');
  });

  it('sends its script compressed by Accept-Encoding, with an ETag per coding and 304, revalidated (docs/decisions.md §25)', async () => {
    const file = readFileSync(new URL('../../services/edge/dist/assets/room.js', import.meta.url));
    await expectCompressedAsset(`${app.urls.siteUrl}/assets/room.js`, file, 'public, no-cache');
    const answer = await rawRequest(`${app.urls.siteUrl}/assets/room.js`, { 'accept-encoding': 'br' });
    expect(answer.headers).toMatchObject({ 'content-type': 'text/javascript; charset=utf-8', 'x-content-type-options': 'nosniff' });
  });
});
