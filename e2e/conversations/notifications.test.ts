import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { a2aClient, partsOf, send, textMessage } from '../support/a2a.js';
import { post, type Problem, signUp } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { callTool, mcpClient, refusedToolCall, toolProblem } from '../support/mcp.js';
import { SseClient } from '../support/sse.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
const alan = { name: 'Alan Turing', password: 'the imitation game' };

interface NotificationBody {
  id: string;
  type: 'mention' | 'reply' | 'direct_message';
  read: boolean;
  post?: { id: string; text: string; agentName: string; replyTo?: string };
  message?: { id: string; text: string; fromAgentName: string };
}

interface NotificationList {
  data: NotificationBody[];
  has_more: boolean;
  next_cursor: string | null;
  unread_count: number;
  read_up_to: string | null;
}

describe('a threaded conversation with a mention, over three protocols, and the notifications it makes', () => {
  let app: Embedded;
  /** Speaks REST; is mentioned and answered. */
  let scout: string;
  /** Speaks MCP. */
  let scribe: string;
  /** Speaks A2A. */
  let courier: string;
  let scoutId: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    scout = (await signUp(app, ['posts:write', 'messages:read', 'messages:write'], 'scout', ada)).token;
    scribe = (await signUp(app, ['posts:write', 'messages:read'], 'scribe', alan)).token;
    courier = (await signUp(app, ['posts:write', 'messages:write'], 'courier', alan)).token;
    const agents = (await (await fetch(`${app.urls.baseUrl}/agents?limit=50`)).json()) as { data: { id: string; agentName: string }[] };
    scoutId = agents.data.find((agent) => agent.agentName === 'scout')?.id ?? '';
  });

  afterAll(() => app?.stop());

  const notifications = async (token: string, query = ''): Promise<NotificationList> => {
    const response = await fetch(`${app.urls.baseUrl}/notifications${query}`, { headers: { authorization: `Bearer ${token}` } });
    expect(response.status, await response.clone().text()).toBe(200);
    return (await response.json()) as NotificationList;
  };

  it('tells the mentioned agent on its live feed, without polling a list, and keeps it in its notifications', async () => {
    // scout follows its notifications live before anything happens.
    const feed = await SseClient.connect(`${app.urls.baseUrl}/notifications/stream`, { authorization: `Bearer ${scout}` });
    // The stream's first comment says the watch is positioned: everything from now on reaches it.
    await feed.waitForComments(1);
    try {
      const root = (await (await post(app, scout, { text: 'Where do we keep the minutes?' })).json()) as { id: string };
      // scribe answers over MCP and mentions scout by name: one notification, a reply.
      const client = await mcpClient(app, scribe);
      await callTool(client, 'room_post', { text: 'In the wiki, @scout', reply_to: root.id });
      // courier joins the thread over A2A (the context is the thread) and mentions scout by id.
      const room = await a2aClient(app.urls.siteUrl);
      const answered = partsOf(await send(room, { ...textMessage([`And a copy in the repo, @${scoutId}`]), contextId: root.id }, courier));
      expect(answered.data.post).toMatchObject({ threadId: root.id });
      // …and sends scout a direct message.
      const direct = await send(await a2aClient(`${app.urls.apiUrl}/a2a/${scoutId}`), textMessage(['ping']), courier);
      expect(partsOf(direct).data.message).toMatchObject({ text: 'ping' });

      const live = await feed.waitForEvents(3, 5_000);
      expect(live.map((event) => event.event)).toEqual(['notification', 'notification', 'notification']);
      const delivered = live.map((event) => JSON.parse(event.data) as NotificationBody);
      expect(delivered.map((n) => n.type)).toEqual(['reply', 'reply', 'direct_message']);
      expect(delivered[0]?.post).toMatchObject({ text: 'In the wiki, @scout', agentName: 'scribe', replyTo: root.id });
      expect(delivered[2]?.message).toMatchObject({ text: 'ping', fromAgentName: 'courier' });
      expect(live.map((event) => event.id)).toEqual(delivered.map((n) => n.id));

      // The same, newest first, in the list, with what is unread.
      const listed = await notifications(scout);
      expect(listed.data.map((n) => n.type)).toEqual(['direct_message', 'reply', 'reply']);
      expect(listed).toMatchObject({ unread_count: 3, read_up_to: null });
      await client.close();
    } finally {
      feed.close();
    }
  });

  it('notifies a mention that is no reply as a mention, and never the author of its own post', async () => {
    const before = (await notifications(scout)).data.length;
    const client = await mcpClient(app, scribe);
    await callTool(client, 'room_post', { text: 'Thanks @scout for the notes' });
    await post(app, scout, { text: 'Talking to myself, @scout' });
    await expect.poll(async () => (await notifications(scout)).data.length, { timeout: 5_000 }).toBe(before + 1);
    expect((await notifications(scout)).data[0]).toMatchObject({ type: 'mention', post: { text: 'Thanks @scout for the notes' } });
    await client.close();
  });

  it('moves a read marker forward only, and lists only what is unread on asking', async () => {
    const all = await notifications(scout);
    const middle = all.data[1] as NotificationBody;
    const mark = async (upTo: string): Promise<Response> =>
      fetch(`${app.urls.baseUrl}/notifications/read`, {
        method: 'POST',
        headers: { authorization: `Bearer ${scout}`, 'content-type': 'application/json' },
        body: JSON.stringify({ up_to: upTo }),
      });
    const marked = await mark(middle.id);
    expect(marked.status).toBe(200);
    expect(await marked.json()).toEqual({ read_up_to: middle.id, unread_count: 1 });
    const unread = await notifications(scout, '?unread=true');
    expect(unread.data.map((n) => n.id)).toEqual([all.data[0]?.id]);
    expect(unread).toMatchObject({ unread_count: 1, read_up_to: middle.id });
    // An older id changes nothing: the marker never moves backwards (and the same call twice is the same).
    expect(await (await mark(all.data.at(-1)?.id ?? '')).json()).toEqual({ read_up_to: middle.id, unread_count: 1 });
    expect((await notifications(scout)).data.map((n) => n.read)).toEqual(all.data.map((_, i) => i >= 1));
    // An id that is not one of scout's notifications.
    const foreign = await mark('1-0');
    expect(foreign.status).toBe(404);
    expect(((await foreign.json()) as Problem).type).toBe(`${app.urls.siteUrl}/problems/notification-not-found`);
  });

  it('serves the same over MCP: room_read_notifications and room_mark_read, with their scope', async () => {
    const client = await mcpClient(app, scout);
    const read = await callTool(client, 'room_read_notifications', { unread: true });
    const page = read.structuredContent as unknown as NotificationList;
    expect(page.unread_count).toBe(page.data.length);
    expect(read.content[0]?.text).toContain(`${page.unread_count} unread`);
    const newest = page.data[0]?.id ?? '';
    expect((await callTool(client, 'room_mark_read', { up_to: newest })).structuredContent).toEqual({ read_up_to: newest, unread_count: 0 });
    expect(toolProblem(await callTool(client, 'room_mark_read', { up_to: 'nope' }))).toMatchObject({ code: 'not_found' });
    // courier holds no messages:read: the feed is not its to read.
    const noScope = await refusedToolCall(await mcpClient(app, courier), 'room_read_notifications');
    expect(noScope).toMatchObject({ status: 403, problem: { required_scope: 'messages:read' } });
    await client.close();
  });

  it("pages notifications newest first with cursors of the agent's own, and names no other feed", async () => {
    for (let i = 0; i < 3; i += 1) await post(app, scribe, { text: `@scout page ${i}` });
    await expect
      .poll(async () => (await notifications(scout, '?limit=50')).data.filter((n) => n.post?.text.includes('page')).length, { timeout: 5_000 })
      .toBe(3);
    const first = await notifications(scout, '?limit=2');
    expect(first.has_more).toBe(true);
    const second = await notifications(scout, `?limit=2&cursor=${first.next_cursor}`);
    expect((second.data[0]?.id ?? '') < (first.data[1]?.id ?? '')).toBe(true);
    // Another agent's cursor is not scout's, and no parameter names another feed.
    const other = await fetch(`${app.urls.baseUrl}/notifications?cursor=${first.next_cursor}`, { headers: { authorization: `Bearer ${scribe}` } });
    expect(other.status).toBe(400);
    const named = await fetch(`${app.urls.baseUrl}/notifications?agent=${scoutId}`, { headers: { authorization: `Bearer ${scribe}` } });
    expect(named.status).toBe(400);
  });
});
