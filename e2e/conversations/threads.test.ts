import { freePort } from '@agentroom/kit/local';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { a2aClient, partsOf, send, textMessage } from '../support/a2a.js';
import { post, type Problem, signUp } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { callTool, mcpClient, toolProblem } from '../support/mcp.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };

interface PostBody {
  id: string;
  agentId: string;
  agentName: string;
  text: string;
  via: string;
  replyTo?: string;
  threadId?: string;
  replyCount?: number;
  mentions?: { id: string; agentName: string }[];
}

interface ThreadBody {
  object: 'list';
  post: PostBody;
  data: PostBody[];
  has_more: boolean;
  next_cursor: string | null;
}

describe('replies and threads, over REST, MCP and A2A', () => {
  let app: Embedded;
  let scout: string;
  let scribe: string;
  let scoutId: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    scout = (await signUp(app, ['posts:write', 'messages:write'], 'scout', ada)).token;
    scribe = (await signUp(app, ['posts:write'], 'scribe', ada)).token;
    const agents = (await (await fetch(`${app.urls.baseUrl}/agents?limit=50`)).json()) as { data: { id: string; agentName: string }[] };
    scoutId = agents.data.find((agent) => agent.agentName === 'scout')?.id ?? '';
  });

  afterAll(() => app?.stop());

  const created = async (response: Response): Promise<PostBody> => {
    expect(response.status, await response.clone().text()).toBe(201);
    return (await response.json()) as PostBody;
  };
  const thread = async (postId: string, query = ''): Promise<ThreadBody> => {
    const response = await fetch(`${app.urls.baseUrl}/posts/${postId}/replies${query}`);
    expect(response.status).toBe(200);
    return (await response.json()) as ThreadBody;
  };

  it('answers a post with a reply, keeps threads flat, and counts the replies of the post that starts one', async () => {
    const root = await created(await post(app, scout, { text: 'Who has read the spec?' }));
    expect(root.replyTo).toBeUndefined();
    const first = await created(await post(app, scribe, { text: 'I have.', reply_to: root.id }));
    expect(first).toMatchObject({ replyTo: root.id, threadId: root.id });
    // A reply to a reply joins the same thread, naming the post it answers.
    const second = await created(await post(app, scout, { text: 'Which part?', reply_to: first.id }));
    expect(second).toMatchObject({ replyTo: first.id, threadId: root.id });

    const read = (await (await fetch(`${app.urls.baseUrl}/posts/${root.id}`)).json()) as PostBody;
    expect(read).toMatchObject({ id: root.id, replyCount: 2 });
    const listed = await thread(root.id);
    expect(listed.post.id).toBe(root.id);
    expect(listed.data.map((p) => p.text)).toEqual(['I have.', 'Which part?']);
    // A reply starts no thread of its own: its answers are in its thread.
    expect((await thread(first.id)).data).toEqual([]);
    // The room lists replies too, each with its reply fields.
    const room = (await (await fetch(`${app.urls.baseUrl}/posts?limit=3`, { headers: { 'cache-control': 'no-cache' } })).json()) as { data: PostBody[] };
    expect(room.data.map((p) => p.id)).toEqual([second.id, first.id, root.id]);
    expect(room.data[2]?.replyCount).toBe(2);
    // The first page from edge's memory counts the replies as the room does.
    const cached = (await (await fetch(`${app.urls.baseUrl}/posts?limit=3`)).json()) as { data: PostBody[] };
    expect(cached).toEqual(room);
  });

  it('pages a thread oldest first with cursors of its own', async () => {
    const root = await created(await post(app, scout, { text: 'Count to five, one reply each' }));
    for (let i = 1; i <= 5; i += 1) await created(await post(app, scribe, { text: `${i}`, reply_to: root.id }));
    const page1 = await thread(root.id, '?limit=2');
    expect(page1.data.map((p) => p.text)).toEqual(['1', '2']);
    expect(page1.has_more).toBe(true);
    const page2 = await thread(root.id, `?limit=2&cursor=${page1.next_cursor}`);
    expect(page2.data.map((p) => p.text)).toEqual(['3', '4']);
    const page3 = await thread(root.id, `?limit=2&cursor=${page2.next_cursor}`);
    expect(page3).toMatchObject({ has_more: false, next_cursor: null });
    expect(page3.data.map((p) => p.text)).toEqual(['5']);
    // A cursor of the room's list, or of another thread, is not this thread's.
    const roomCursor = (
      (await (await fetch(`${app.urls.baseUrl}/posts?limit=1`, { headers: { 'cache-control': 'no-cache' } })).json()) as { next_cursor: string }
    ).next_cursor;
    const foreign = await fetch(`${app.urls.baseUrl}/posts/${root.id}/replies?cursor=${roomCursor}`);
    expect(foreign.status).toBe(400);
    expect(((await foreign.json()) as Problem).type).toBe(`${app.urls.siteUrl}/problems/invalid-cursor`);
  });

  it('refuses a reply to a post the room does not have, and reads no such post', async () => {
    for (const missing of ['1-0', 'not-a-post-id']) {
      const refused = await post(app, scout, { text: 'into the void', reply_to: missing });
      expect(refused.status).toBe(404);
      expect((await refused.json()) as Problem).toMatchObject({ code: 'not_found', type: `${app.urls.siteUrl}/problems/post-not-found` });
    }
    const unknown = await fetch(`${app.urls.baseUrl}/posts/1-0`);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as Problem).remedy).toContain(`GET ${app.urls.baseUrl}/posts`);
    expect((await fetch(`${app.urls.baseUrl}/posts/1-0/replies`)).status).toBe(404);
  });

  it('mentions agents by @id and by @name, as the room resolves them when the post is made', async () => {
    const mentioning = await created(await post(app, scribe, { text: `@scout and @${scoutId}, have a look; and ada@example.com is no mention` }));
    expect(mentioning.mentions).toEqual([{ id: scoutId, agentName: 'scout' }]);
    // Two active agents of one name: @name mentions nobody.
    await signUp(app, ['posts:write'], 'twin', ada);
    await signUp(app, ['posts:write'], 'twin', ada);
    expect((await created(await post(app, scribe, { text: 'hello @twin' }))).mentions).toBeUndefined();
  });

  it('carries replies over MCP: room_post with reply_to, and room_read_thread', async () => {
    const root = await created(await post(app, scout, { text: 'MCP thread' }));
    const client = await mcpClient(app, scribe);
    const replied = await callTool(client, 'room_post', { text: 'from MCP, @scout', reply_to: root.id });
    expect(replied.structuredContent).toMatchObject({ replyTo: root.id, threadId: root.id, via: 'mcp', mentions: [{ id: scoutId, agentName: 'scout' }] });
    expect(replied.content[0]?.text).toContain(`replying to ${root.id}`);
    const anonymous = await mcpClient(app);
    const read = await callTool(anonymous, 'room_read_thread', { postId: root.id });
    expect(read.structuredContent).toMatchObject({ post: { id: root.id, replyCount: 1 }, data: [{ text: 'from MCP, @scout' }] });
    expect(read.content[0]?.text).toContain('1 replies, oldest first');
    expect(toolProblem(await callTool(anonymous, 'room_read_thread', { postId: '1-0' }))).toMatchObject({
      code: 'not_found',
      type: `${app.urls.siteUrl}/problems/post-not-found`,
    });
    await client.close();
    await anonymous.close();
  });

  it('carries replies over A2A: a message whose contextId is a post replies in its thread, and the answer names the thread', async () => {
    const root = await created(await post(app, scout, { text: 'A2A thread' }));
    const room = await a2aClient(app.urls.siteUrl);
    const message = { ...textMessage(['from A2A']), contextId: root.id };
    const answer = await send(room, message, scout);
    const { data } = partsOf(answer);
    expect(data.post).toMatchObject({ replyTo: root.id, threadId: root.id, via: 'a2a' });
    expect((answer as { contextId: string }).contextId).toBe(root.id);
    // A context of the client's own (not a post id) makes a post that starts its own thread.
    const fresh = await send(room, { ...textMessage(['a new topic']), contextId: 'ctx-of-my-own' }, scout);
    const freshPost = partsOf(fresh).data.post as PostBody;
    expect(freshPost.replyTo).toBeUndefined();
    expect((fresh as { contextId: string }).contextId).toBe(freshPost.id);
  });
});

describe('the room page shows replies under their post, live', () => {
  let app: Embedded;
  let browser: Browser;
  let page: Page;
  let writer: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    writer = (await signUp(app, ['posts:write'], 'herald', ada)).token;
    browser = await launchChromium();
    page = await browser.newPage();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
  });

  it('renders a thread nested when the page opens, and nests a new reply as it arrives', async () => {
    const root = (await (await post(app, writer, { text: 'Thread on the page' })).json()) as PostBody;
    await post(app, writer, { text: 'first answer, @herald', reply_to: root.id });
    await page.goto(`${app.urls.siteUrl}/`);
    const replies = page.locator(`#post-${root.id} > ul.replies > li`);
    await expect.poll(() => replies.count()).toBe(1);
    expect(await page.locator(`#post-${root.id} .mention`).first().innerText()).toBe('@herald');
    await expect.poll(() => page.locator('#live-status').innerText()).toContain('Live');
    await post(app, writer, { text: 'second answer, live', reply_to: root.id });
    await expect.poll(() => replies.count(), { timeout: 5_000 }).toBe(2);
    expect(await replies.nth(1).locator('.text').innerText()).toBe('second answer, live');
    // Not also at the top of the list.
    expect(await page.locator('#posts > li').first().getAttribute('id')).toBe(`post-${root.id}`);
  });
});
