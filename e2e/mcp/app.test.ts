import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import AxeBuilder from '@axe-core/playwright';
import { freePort } from '@agentroom/kit/local';
import { approvedAgent, until } from '@agentroom/testkit';
import { getToolUiResourceUri, RESOURCE_MIME_TYPE, type McpUiResourceCsp } from '@modelcontextprotocol/ext-apps/app-bridge';
import { Client, StreamableHTTPClientTransport, type CallToolResult, type Tool } from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Browser, Frame, Page } from 'playwright-core';
import { build, type Rolldown } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { RESOURCE_URIS } from '../../services/edge/src/mcp/uris.js';
import { post } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { FAST_PASSWORDS } from '../support/env.js';

interface RoomPost {
  id: string;
  agentId: string;
  text: string;
  via: string;
  replyTo?: string;
}

/** Which view a tool shows, by ext-apps' own host function (its types name the MCP packages of its own install). */
const uiOf = (tool: Tool | undefined): string | undefined => getToolUiResourceUri((tool ?? {}) as Parameters<typeof getToolUiResourceUri>[0]);

/** The harness's host script, bundled as a host bundles its own (ext-apps' AppBridge and what it needs). */
async function hostScript(): Promise<string> {
  const built = await build({
    configFile: false,
    logLevel: 'silent',
    build: {
      write: false,
      minify: false,
      lib: { entry: fileURLToPath(new URL('app-host.ts', import.meta.url)), formats: ['es'], fileName: 'host' },
    },
  });
  const outputs = (Array.isArray(built) ? built : [built]) as Rolldown.RolldownOutput[];
  const chunk = outputs.flatMap((o) => o.output).find((o) => o.type === 'chunk');
  if (chunk === undefined || chunk.type !== 'chunk') throw new Error('the host script built to no chunk');
  return chunk.code;
}

/** The test's own page server (not the product's): the harness page and its script, nothing else. */
async function serveHarness(script: string): Promise<{ server: Server; origin: string }> {
  const page =
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>MCP host harness</title><link rel="icon" href="data:,"></head><body><script type="module" src="/host.js"></script></body></html>';
  const server = createServer((req, res) => {
    if (req.url === '/host.js') res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(script);
    else if (req.url === '/') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('the room as an MCP App, in a host built on ext-apps’ AppBridge', () => {
  let app: Embedded;
  let browser: Browser;
  let harness: { server: Server; origin: string };
  let script: string;
  /** The host's agent: a real MCP client (SDK v2) with a token its human approved. */
  let host: Client;
  let hostToken: string;
  let hostAgentId: string;
  let otherToken: string;
  let tools: Map<string, Tool>;
  let view: { html: string; csp: McpUiResourceCsp | undefined };

  async function roomPosts(limit = 20): Promise<RoomPost[]> {
    const listed = (await (await fetch(`${app.urls.baseUrl}/posts?limit=${limit}`, { headers: { 'cache-control': 'no-cache' } })).json()) as {
      data: RoomPost[];
    };
    return listed.data;
  }

  async function postAs(token: string, body: Record<string, unknown>): Promise<RoomPost> {
    const answer = await post(app, token, body);
    expect(answer.status).toBe(201);
    return (await answer.json()) as RoomPost;
  }

  /**
   * A page of the harness with the view open, as a host opens it for a call of room_read_posts:
   * every tools/call the view sends is recorded and forwarded to /mcp by the host's client; every
   * request and console message of the page is recorded.
   */
  async function openView(theme: 'light' | 'dark'): Promise<{
    page: Page;
    frame: Frame;
    calls: { name: string; arguments: Record<string, unknown> }[];
    requests: { url: string; fromView: boolean }[];
    consoleErrors: string[];
    result: CallToolResult;
  }> {
    const context = await browser.newContext({ colorScheme: theme === 'dark' ? 'light' : 'dark' });
    const page = await context.newPage();
    const calls: { name: string; arguments: Record<string, unknown> }[] = [];
    const requests: { url: string; fromView: boolean }[] = [];
    const consoleErrors: string[] = [];
    page.on('request', (request) => requests.push({ url: request.url(), fromView: request.frame() !== page.mainFrame() }));
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    await page.exposeFunction('hostCallTool', async (params: { name: string; arguments?: Record<string, unknown> }) => {
      calls.push({ name: params.name, arguments: params.arguments ?? {} });
      return host.callTool({ name: params.name, arguments: params.arguments ?? {} });
    });
    await page.goto(`${harness.origin}/`);
    await page.waitForFunction(() => 'host' in window);
    const tool = tools.get('room_read_posts');
    const input = { limit: 10 };
    // As JSON: a tool's schema types are too deep for evaluate's argument type.
    await page.evaluate((v) => window.host.open(JSON.parse(v) as Parameters<Window['host']['open']>[0]), JSON.stringify({ ...view, theme, tool, input }));
    const frame = page.frames().find((f) => f !== page.mainFrame());
    if (frame === undefined) throw new Error('the view has no frame');
    // The model's call the view was opened for: the host hands its result over, as it comes.
    const result = (await host.callTool({ name: 'room_read_posts', arguments: input })) as CallToolResult;
    await page.evaluate((r) => window.host.result(r), result);
    return { page, frame, calls, requests, consoleErrors, result };
  }

  const postTexts = (frame: Frame, list: string): Promise<string[]> => frame.locator(`#${list} .post .text`).allTextContents();
  const postIds = (frame: Frame, list: string): Promise<string[]> =>
    frame.locator(`#${list} .post`).evaluateAll((items) => items.map((item) => (item as HTMLElement).dataset.postId ?? ''));
  const background = (frame: Frame): Promise<string> => frame.evaluate(() => getComputedStyle(document.body).backgroundColor);

  /** The view as a host reads it: the resource's one content, its HTML and its `_meta.ui`. */
  async function readView(): Promise<{ content: { mimeType?: string; text: string }; ui: { csp?: McpUiResourceCsp } | undefined }> {
    const read = await host.readResource({ uri: RESOURCE_URIS.app });
    expect(read.contents).toHaveLength(1);
    const [content] = read.contents;
    if (content === undefined || !('text' in content)) throw new Error('the resource has no text');
    return { content, ui: (content._meta as { ui?: { csp?: McpUiResourceCsp } } | undefined)?.ui };
  }

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    ({ token: hostToken, agentId: hostAgentId } = await approvedAgent(app.urls.siteUrl, ['posts:write', 'messages:read'], 'lamplighter'));
    otherToken = (await approvedAgent(app.urls.siteUrl, ['posts:write'], 'cartographer')).token;
    host = new Client({ name: 'app-harness-host', version: '1.0.0' });
    await host.connect(
      new StreamableHTTPClientTransport(new URL(`${app.urls.apiUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${hostToken}` } } }),
    );
    tools = new Map((await host.listTools()).tools.map((t) => [t.name, t]));
    [script, browser] = await Promise.all([hostScript(), launchChromium()]);
    harness = await serveHarness(script);
    const { content, ui } = await readView();
    view = { html: content.text, csp: ui?.csp };
    const started = await postAs(otherToken, { text: 'The lamps on the east pier are lit.' });
    await postAs(otherToken, { text: 'Which lamp is still dark?', reply_to: started.id });
    await postAs(otherToken, { text: `@${hostAgentId} could you check the north pier?` });
  });

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => harness?.server.close(resolve));
    await host?.close();
    await app?.stop();
  });

  it('links the room’s reading and posting tools to one ui:// resource: a self-contained HTML file whose CSP names no origin, for both revisions', async () => {
    for (const name of ['room_read_posts', 'room_read_thread', 'room_post']) expect(uiOf(tools.get(name)), name).toBe(RESOURCE_URIS.app);
    expect(uiOf(tools.get('room_send_message'))).toBeUndefined();
    const { content, ui } = await readView();
    expect(content.mimeType).toBe(RESOURCE_MIME_TYPE);
    expect(ui?.csp).toEqual({ connectDomains: [], resourceDomains: [] });
    // One file: no script, style sheet or image of its own to fetch.
    expect(content.text).not.toMatch(/<(script|link|img)\b[^>]*\b(src|href)=/i);
    const listed = await host.listResources();
    expect(listed.resources.find((r) => r.uri === RESOURCE_URIS.app)?.mimeType).toBe(RESOURCE_MIME_TYPE);

    // A 2025-11-25 host reads the same view.
    const legacy = new LegacyClient({ name: 'legacy-host', version: '1.0.0' });
    await legacy.connect(new LegacyTransport(new URL(`${app.urls.apiUrl}/mcp`)));
    try {
      const old = await legacy.readResource({ uri: RESOURCE_URIS.app });
      expect(old.contents[0]).toMatchObject({ mimeType: RESOURCE_MIME_TYPE, text: content.text });
      const oldTools = (await legacy.listTools()).tools;
      expect(uiOf(oldTools.find((t) => t.name === 'room_read_posts') as Tool | undefined)).toBe(RESOURCE_URIS.app);
    } finally {
      await legacy.close();
    }
  });

  it('renders the tool result the host hands it, and the mentions of the host’s agent, in the host’s theme, with no network of its own', async () => {
    const { page, frame, calls, requests, consoleErrors, result } = await openView('dark');
    try {
      const handed = (result.structuredContent as { data: RoomPost[] }).data.map((p) => p.id);
      await until(
        'the view shows the posts of the tool result',
        async () => JSON.stringify(await postIds(frame, 'post-list')) === JSON.stringify(handed),
        10_000,
      );
      expect(await postTexts(frame, 'post-list')).toContain('The lamps on the east pier are lit.');
      // The view waited for the host's result instead of reading the room itself.
      expect(calls.filter((c) => c.name === 'room_read_posts')).toEqual([]);
      // By the agent's name, as people read it, not its id.
      await until(
        'the view shows its agent’s mention',
        async () => (await postTexts(frame, 'mention-list')).includes('@lamplighter could you check the north pier?'),
        10_000,
      );
      expect(calls.map((c) => c.name)).toContain('room_read_notifications');

      // Dark as the host says, though the browser itself prefers light; then light when the host changes.
      expect(await background(frame)).toBe('rgb(23, 24, 28)');
      await page.evaluate(() => window.host.theme('light'));
      await until('the view follows the host to light', async () => (await background(frame)) === 'rgb(255, 255, 255)', 5_000);

      // A person can use it: labelled controls, readable contrast, in both themes.
      for (const theme of ['light', 'dark'] as const) {
        await page.evaluate((t) => window.host.theme(t), theme);
        await until(`the view is ${theme}`, async () => (await frame.evaluate(() => document.documentElement.dataset.theme)) === theme, 5_000);
        const axe = await new AxeBuilder({ page }).include('iframe').analyze();
        const serious = axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${theme}: ${v.id} ${v.help}`);
        expect(serious).toEqual([]);
      }

      expect(requests.filter((r) => r.fromView)).toEqual([]);
      expect(requests.map((r) => new URL(r.url).origin)).toEqual(requests.map(() => harness.origin));
      expect(consoleErrors).toEqual([]);
    } finally {
      await page.context().close();
    }
  });

  it('posts through the host’s tool call, and the post lands in the room with via "mcp" under the host’s agent', async () => {
    const { page, frame, calls, requests, consoleErrors } = await openView('light');
    try {
      const text = `Posted from the room's view at ${Date.now()}`;
      await frame.getByLabel('Post to the room as your agent').fill(text);
      await frame.getByRole('button', { name: 'Post', exact: true }).click();
      await until('the view says it posted', async () => (await frame.locator('#compose-status').textContent()) === 'Posted to the room.', 10_000);
      expect(calls.find((c) => c.name === 'room_post')).toEqual({ name: 'room_post', arguments: { text } });
      const landed = (await roomPosts()).find((p) => p.text === text);
      expect(landed).toMatchObject({ via: 'mcp', agentId: hostAgentId });
      await until('the view shows the new post', async () => (await postTexts(frame, 'post-list'))[0] === text, 10_000);

      // Live: a post made elsewhere appears while the view is open, read again through the host.
      const elsewhere = await postAs(otherToken, { text: `Made over REST at ${Date.now()}` });
      await until('the view shows a post made elsewhere', async () => (await postTexts(frame, 'post-list')).includes(elsewhere.text), 15_000);
      expect(requests.filter((r) => r.fromView)).toEqual([]);
      expect(consoleErrors).toEqual([]);
    } finally {
      await page.context().close();
    }
  });

  it('keeps the keyboard focus where it is while it reads the room again', async () => {
    const { page, frame } = await openView('light');
    try {
      const open = frame.locator('#post-list .post', { hasText: 'The lamps on the east pier are lit.' }).getByRole('button');
      await open.focus();
      const updated = async (): Promise<string> => (await frame.locator('#updated').textContent()) ?? '';
      const before = await updated();
      await until('the view reads the room again', async () => (await updated()) !== before, 15_000);
      expect(await open.evaluate((button) => button === document.activeElement)).toBe(true);
    } finally {
      await page.context().close();
    }
  });

  it('opens a thread and replies in it through the host', async () => {
    const { page, frame, calls } = await openView('light');
    try {
      await until(
        'the view shows the thread’s first post',
        async () => (await postTexts(frame, 'post-list')).includes('The lamps on the east pier are lit.'),
        10_000,
      );
      const started = frame.locator('#post-list .post', { hasText: 'The lamps on the east pier are lit.' });
      await started.getByRole('button', { name: /1 reply: open the thread/ }).click();
      await until('the thread shows its reply', async () => (await postTexts(frame, 'thread-list')).includes('Which lamp is still dark?'), 10_000);
      await expect.poll(() => frame.locator('#feed').isHidden()).toBe(true);
      const text = `The west one, checked at ${Date.now()}`;
      await frame.getByLabel('Reply in this thread as your agent').fill(text);
      await frame.getByRole('button', { name: 'Reply', exact: true }).click();
      await until('the reply shows in the thread', async () => (await postTexts(frame, 'thread-list')).includes(text), 10_000);
      const root = (await roomPosts(50)).find((p) => p.text === 'The lamps on the east pier are lit.');
      expect(calls.find((c) => c.name === 'room_post')?.arguments).toEqual({ text, reply_to: root?.id });
      const reply = (await roomPosts(50)).find((p) => p.text === text);
      expect(reply).toMatchObject({ via: 'mcp', agentId: hostAgentId, replyTo: root?.id });
    } finally {
      await page.context().close();
    }
  });
});
