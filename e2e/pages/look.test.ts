import { mkdir } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import AxeBuilder from '@axe-core/playwright';
import { freePort } from '@agentroom/kit/local';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { post, signUp } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { connectHost, HOST_REDIRECT, pkce, registerHost } from '../support/mcp-host.js';

/** Where the screenshots go: git-ignored, named by page, width and colour scheme (CONTRIBUTING.md says so). */
const SHOTS = fileURLToPath(new URL('../../test-results/pages/', import.meta.url));
const WIDE = { width: 1280, height: 800 };
const PHONE = { width: 360, height: 740 };
const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
const grace = { name: 'Grace Hopper', password: 'another good password' };

interface Flow {
  device_code: string;
  user_code: string;
  verification_uri_complete: string;
}

/** One page a human sees: how to reach it, whether signed in, and the status its document answers. */
interface Visit {
  name: string;
  signedIn: boolean;
  status?: number;
  /** Goes to the page, from a fresh tab of the right context. */
  open(page: Page): Promise<unknown>;
}

/** What went wrong on one page, for the assertion's message. */
interface Finding {
  page: string;
  what: string;
}

/**
 * Every human page in chromium, at 1280 and 360 px wide, in the light and the dark scheme: one
 * look (the shell of docs/decisions.md §23), a full-page screenshot of each in test-results/pages/,
 * no console error, no failed request, no sideways scroll on a phone, and no serious or critical
 * accessibility violation (axe-core).
 */
describe('every human page, in chromium, at two widths and in both colour schemes', () => {
  let app: Embedded;
  let browser: Browser;
  let receiver: Server;
  let scoutToken = '';
  let scoutId = '';
  /** The first post of the thread made below, for the room page's thread view. */
  let threadId = '';
  let clientId = '';
  let adaCookie = '';
  const contexts: BrowserContext[] = [];

  async function startSignup(agentName: string, scopes: string[]): Promise<Flow> {
    const started = await fetch(`${app.urls.apiUrl}/agent/signup/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ scopes, agent_name: agentName }),
    });
    return (await started.json()) as Flow;
  }

  /** A consent request of the registered host: the URL a browser is sent to. */
  function authorizeUrl(): string {
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: HOST_REDIRECT,
      code_challenge: pkce().challenge,
      code_challenge_method: 'S256',
      state: 'look',
      scope: 'posts:write messages:read',
    });
    return `${app.urls.siteUrl}/authorize?${query.toString()}`;
  }

  async function signedInContext(options: {
    viewport: { width: number; height: number };
    colorScheme: 'light' | 'dark';
    javaScriptEnabled?: boolean;
  }): Promise<BrowserContext> {
    const context = await browser.newContext({ ...options, timezoneId: 'America/Los_Angeles', locale: 'en-US' });
    contexts.push(context);
    const page = await context.newPage();
    await page.goto(`${app.urls.siteUrl}/signin`);
    await page.getByLabel('Name', { exact: true }).fill(ada.name);
    await page.getByLabel('Password', { exact: true }).fill(ada.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/account$/);
    await page.close();
    return context;
  }

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      req.resume();
      res.writeHead(req.url === '/gone' ? 410 : 204).end();
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const hooks = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '1000000',
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    });
    await app.auth.humans.register(ada.name, ada.password);
    // An agent from each origin: approved with a code, provisioned by an operator, made for an MCP host.
    ({ token: scoutToken } = await signUp(app, ['posts:write', 'agents:read', 'messages:read'], 'scout', ada));
    const { token: heraldToken } = await signUp(app, ['posts:write', 'messages:read'], 'herald', grace);
    await app.auth.flows.provision({ humanName: ada.name, agentName: 'load-1', scopes: ['posts:write'], reason: 'k6 load test' });
    // A thread with replies and mentions.
    const first = (await (await post(app, scoutToken, { text: 'Good morning, room. Anyone tried the new webhooks yet?' })).json()) as {
      id: string;
      agentId: string;
    };
    scoutId = first.agentId;
    threadId = first.id;
    await post(app, heraldToken, { text: 'Yes: mine fire on mentions and replies. @scout you should try them.', reply_to: first.id });
    await post(app, scoutToken, { text: 'Registered one just now, thanks @herald!', reply_to: first.id });
    await post(app, heraldToken, {
      text: 'A longer post, to see how text wraps on a phone: the room keeps posts short, at most 500 characters, and every post says which agent wrote it, for which human, and how it arrived.',
    });
    // Webhooks of scout: one that works, one whose endpoint is gone.
    for (const [path, events] of [
      ['/agent-room', ['mention', 'reply']],
      ['/gone', ['direct_message']],
    ] as const) {
      const made = await fetch(`${app.urls.baseUrl}/webhooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${scoutToken}` },
        body: JSON.stringify({ url: `${hooks}${path}`, events }),
      });
      expect(made.status, await made.clone().text()).toBe(201);
      const { id } = (await made.json()) as { id: string };
      await fetch(`${app.urls.baseUrl}/webhooks/${id}/test`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${scoutToken}` },
        body: '{}',
      });
    }
    // An MCP host, connected twice: as a new agent of its own, and as scout.
    clientId = await registerHost(app, 'Claude Code');
    browser = await launchChromium();
    const context = await signedInContext({ viewport: WIDE, colorScheme: 'light' });
    adaCookie = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    await connectHost(app, adaCookie, clientId, 'new', 'claude-code');
    await connectHost(app, adaCookie, clientId, scoutId);
    await mkdir(SHOTS, { recursive: true });
    // The webhooks' test events are delivered in the background: wait until both have an attempt.
    for (const started = Date.now(); ;) {
      const listed = (await (await fetch(`${app.urls.baseUrl}/webhooks`, { headers: { authorization: `Bearer ${scoutToken}` } })).json()) as {
        data: { recent_attempts: unknown[] }[];
      };
      if (listed.data.every((hook) => hook.recent_attempts.length > 0)) break;
      if (Date.now() - started > 15_000) throw new Error("the webhooks' test events were not attempted within 15 s");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }, 120_000);

  afterAll(async () => {
    await Promise.all(contexts.map((context) => context.close()));
    await browser?.close();
    await app?.stop();
    receiver?.close();
  });

  /** The pages, each opened fresh; flows that an answer uses up are started anew for each visit. */
  function visits(): Visit[] {
    const site = app.urls.siteUrl;
    const go = (path: string) => (page: Page) => page.goto(`${site}${path}`);
    return [
      { name: 'room', signedIn: false, open: go('/') },
      { name: 'room-search', signedIn: false, open: go('/?q=webhooks') },
      { name: 'room-thread', signedIn: false, open: (page) => page.goto(`${site}/?thread=${threadId}#post-${threadId}`) },
      { name: 'signin', signedIn: false, open: go('/signin') },
      {
        name: 'signin-wrong-password',
        signedIn: false,
        status: 401,
        async open(page) {
          await page.goto(`${site}/signin`, { waitUntil: 'networkidle' });
          await page.getByLabel('Name', { exact: true }).fill(ada.name);
          await page.getByLabel('Password', { exact: true }).fill('not the password');
          await page.getByRole('button', { name: 'Sign in' }).click();
          await page.getByRole('alert').waitFor();
        },
      },
      { name: 'developers', signedIn: false, open: go('/developers') },
      {
        name: 'reference',
        signedIn: false,
        async open(page) {
          await page.goto(`${site}/developers/reference`);
          await page.getByText('Agent Room API', { exact: false }).first().waitFor({ timeout: 10_000 });
        },
      },
      { name: 'webhooks-guide', signedIn: false, open: go('/developers/webhooks') },
      { name: 'problems', signedIn: false, open: go('/problems') },
      { name: 'problem', signedIn: false, open: go('/problems/scope-required') },
      { name: 'not-found', signedIn: false, status: 404, open: go('/no-such-page') },
      { name: 'room-signed-in', signedIn: true, open: go('/') },
      { name: 'account', signedIn: true, open: go('/account') },
      {
        name: 'revoke-token',
        signedIn: true,
        async open(page) {
          await page.goto(`${site}/account`, { waitUntil: 'networkidle' });
          await page.getByRole('button', { name: 'Revoke the token of scout' }).click();
          await page.getByRole('heading', { name: 'Revoke scout?' }).waitFor();
        },
      },
      {
        name: 'revoke-connection',
        signedIn: true,
        async open(page) {
          await page.goto(`${site}/account`, { waitUntil: 'networkidle' });
          await page
            .locator('#agent-' + scoutId)
            .getByRole('button', { name: 'Revoke the connection of Claude Code' })
            .click();
          await page.getByRole('heading', { name: 'Revoke Claude Code?' }).waitFor();
        },
      },
      { name: 'device-enter-code', signedIn: true, open: go('/device') },
      {
        name: 'device-confirm',
        signedIn: true,
        async open(page) {
          await page.goto((await startSignup('notes', ['posts:write', 'messages:read', 'messages:write'])).verification_uri_complete);
        },
      },
      {
        name: 'device-approved',
        signedIn: true,
        async open(page) {
          await page.goto((await startSignup('helper', ['posts:write'])).verification_uri_complete, { waitUntil: 'networkidle' });
          await page.getByRole('button', { name: 'Approve' }).click();
          await page.getByRole('status').waitFor();
        },
      },
      {
        name: 'device-declined',
        signedIn: true,
        async open(page) {
          await page.goto((await startSignup('stranger', ['messages:read'])).verification_uri_complete, { waitUntil: 'networkidle' });
          await page.getByRole('button', { name: 'Decline' }).click();
          await page.getByRole('status').waitFor();
        },
      },
      {
        name: 'device-already-answered',
        signedIn: true,
        async open(page) {
          const flow = await startSignup('twice', ['agents:read']);
          await page.goto(flow.verification_uri_complete, { waitUntil: 'networkidle' });
          await page.getByRole('button', { name: 'Approve' }).click();
          await page.getByRole('status').waitFor();
          // Everything of the answer's page loaded before leaving it: a request cut short is a failed one.
          await page.waitForLoadState('networkidle');
          await page.goto(flow.verification_uri_complete);
        },
      },
      { name: 'consent', signedIn: true, open: (page) => page.goto(authorizeUrl()) },
    ];
  }

  /**
   * Opens every page in a context of this width and scheme; answers what went wrong. `audit` is how
   * much of axe-core runs, since it costs seconds a page: all its rules; all but colour contrast (a
   * phone's layout changes structure, not colours); colour contrast alone (the dark scheme changes
   * colours, not structure); or none (both were checked at the other width).
   */
  async function survey(
    viewport: { width: number; height: number },
    colorScheme: 'light' | 'dark',
    audit: 'all' | 'structure' | 'contrast' | 'none',
  ): Promise<Finding[]> {
    const findings: Finding[] = [];
    const signedOut = await browser.newContext({ viewport, colorScheme, timezoneId: 'America/Los_Angeles', locale: 'en-US' });
    contexts.push(signedOut);
    const signedIn = await signedInContext({ viewport, colorScheme });
    for (const visit of visits()) {
      const page = await (visit.signedIn ? signedIn : signedOut).newPage();
      const found = (what: string): void => {
        findings.push({ page: visit.name, what });
      };
      /** The pages' own documents and what they answered: chromium logs a document's 4xx as a console error, which the status check covers. */
      const documents = new Map<string, number>();
      page.on('console', (message) => {
        if (message.type() !== 'error') return;
        const own = /^Failed to load resource: the server responded with a status of (\d+)/.exec(message.text());
        if (own !== null && documents.get(message.location().url) === Number(own[1])) return;
        found(`console error: ${message.text()}`);
      });
      page.on('pageerror', (error) => found(`script error: ${error.message}`));
      page.on('requestfailed', (request) => found(`request failed: ${request.url()} (${request.failure()?.errorText ?? '?'})`));
      page.on('response', (response) => {
        const isDocument = response.request().isNavigationRequest() && response.request().frame() === page.mainFrame();
        // The page's own document answers its status (a 404 page, a refused sign-in); nothing it loads may fail.
        if (!isDocument && response.status() >= 400) found(`${response.status()} for ${response.url()}`);
      });
      const last = { status: 0 };
      page.on('response', (response) => {
        if (!response.request().isNavigationRequest() || response.request().frame() !== page.mainFrame()) return;
        last.status = response.status();
        documents.set(response.url(), response.status());
      });
      await visit.open(page);
      await page.waitForLoadState('networkidle');
      if (last.status !== (visit.status ?? 200)) found(`answered ${last.status}, not ${visit.status ?? 200}`);
      if (viewport.width === PHONE.width) {
        const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
        if (widths.scroll > widths.client) found(`scrolls sideways: ${widths.scroll} px of content in ${widths.client} px`);
      }
      if (audit !== 'none') {
        // Scalar's own reference app is not ours to audit; the header around it is.
        const builder = new AxeBuilder({ page }).exclude('.scalar-app');
        const axe = await (
          audit === 'contrast' ? builder.withRules(['color-contrast']) : audit === 'structure' ? builder.disableRules(['color-contrast']) : builder
        ).analyze();
        for (const violation of axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')) {
          found(
            `axe ${violation.impact} ${violation.id}: ${violation.help} (${violation.nodes
              .map((node) => node.target.join(' '))
              .slice(0, 3)
              .join('; ')})`,
          );
        }
      }
      await page.screenshot({ path: `${SHOTS}${visit.name}-${viewport.width}${colorScheme === 'dark' ? '-dark' : ''}.png`, fullPage: true });
      await page.close();
    }
    return findings;
  }

  it('frames every page in one shell: the same stylesheet, icon, header and navigation; primary and destructive buttons that look it; /favicon.ico answered', async () => {
    const context = await signedInContext({ viewport: WIDE, colorScheme: 'light' });
    const signedOut = await browser.newContext({ viewport: WIDE });
    contexts.push(signedOut);
    for (const visit of visits()) {
      const page = await (visit.signedIn ? context : signedOut).newPage();
      await visit.open(page);
      const frame = await page.evaluate(() => ({
        stylesheets: Array.from(document.querySelectorAll<HTMLLinkElement>('link[rel=stylesheet]')).map((link) => new URL(link.href).pathname),
        icons: Array.from(document.querySelectorAll<HTMLLinkElement>('link[rel=icon]')).map((link) => `${new URL(link.href).pathname} ${link.type}`),
        navigation: Array.from(document.querySelectorAll('header nav[aria-label=Site] .links a')).map((link) => link.textContent),
        inlineStyles: document.querySelectorAll('style, [style]').length,
      }));
      expect(frame, visit.name).toEqual({
        stylesheets: ['/assets/site.css'],
        icons: ['/favicon.svg image/svg+xml'],
        navigation: ['Room', 'Your agents', 'Developers'],
        inlineStyles: frame.inlineStyles,
      });
      // Our pages carry no inline style (Scalar's reference app adds its own, as its CSP allows).
      if (visit.name !== 'reference') expect(frame.inlineStyles, visit.name).toBe(0);
      // The buttons of a decision: the one that goes on is primary, the one that revokes destructive, the other plain.
      const look = (name: string) =>
        page
          .getByRole('button', { name, exact: true })
          .evaluate((button) => ({ kind: button.className, background: getComputedStyle(button).backgroundColor }));
      if (visit.name === 'device-confirm' || visit.name === 'consent') {
        const [approve, decline] = [await look('Approve'), await look('Decline')];
        expect(approve.kind, visit.name).toContain('primary');
        expect(decline.kind, visit.name).not.toMatch(/primary|danger/);
        expect(approve.background, visit.name).not.toBe(decline.background);
      }
      if (visit.name === 'revoke-token' || visit.name === 'revoke-connection') {
        const revoke = await look('Revoke');
        const keep = await page
          .getByRole('link', { name: 'Keep it' })
          .evaluate((link) => ({ kind: link.className, background: getComputedStyle(link).backgroundColor }));
        expect(revoke.kind, visit.name).toContain('danger');
        expect(keep.kind, visit.name).not.toMatch(/primary|danger/);
        expect(revoke.background, visit.name).not.toBe(keep.background);
      }
      await page.close();
    }
    // Browsers ask for /favicon.ico where a document links no icon (a JSON document opened in a tab).
    const ico = await fetch(`${app.urls.siteUrl}/favicon.ico`);
    expect(ico.status).toBe(200);
    expect(ico.headers.get('content-type')).toBe('image/x-icon');
    expect([...new Uint8Array(await ico.arrayBuffer()).slice(0, 4)]).toEqual([0, 0, 1, 0]);
  }, 120_000);

  it.each([
    ['1280 px, light', WIDE, 'light', 'all'],
    ['360 px, light', PHONE, 'light', 'structure'],
    ['1280 px, dark', WIDE, 'dark', 'contrast'],
    ['360 px, dark', PHONE, 'dark', 'none'],
  ] as const)(
    '%s: no console error, no failed request, no sideways scroll, no serious accessibility violation',
    async (_label, viewport, scheme, audit) => {
      expect(await survey(viewport, scheme, audit)).toEqual([]);
    },
    480_000,
  );
});
