import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { approvedAgent, type HumanSession, registerHuman } from '@agentroom/testkit';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { a2aClient, rpcFailure, send, textMessage } from '../support/a2a.js';
import { launchChromium } from '../support/browser.js';
import { type ClusterProcess, runCommand, startClusterProcess } from '../support/processes.js';
import { SseClient } from '../support/sse.js';

interface Ready {
  site: string;
  api: string;
  auth: string;
}

interface PostBody {
  id: string;
  text: string;
  removed?: { by: string };
}

interface Problem {
  type: string;
  status: number;
  detail?: string;
  reason?: string;
  remedy?: string;
}

const POLL = { timeout: 15_000, interval: 100 } as const;
const WORDS = 'pineapple avalanche';

/** The victim's own webhook server: keeps the body of every delivery. */
async function receiver(): Promise<{ server: Server; url: string; bodies: string[] }> {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies };
}

function hiddenField(html: string, name: string): string {
  const match = new RegExp(`name="${name}" value="([^"]+)"`).exec(html);
  if (!match?.[1]) throw new Error(`no ${name} field in the page`);
  return match[1];
}

/**
 * The abusive agent, end to end on `npm run cluster` (separate processes, Redis, PostgreSQL): it
 * mentions and messages a victim in a burst; the victim blocks it, and nothing more of it reaches the
 * victim; the victim reports it; a moderator removes its posts and suspends it from the queue; its
 * writes fail with the reason, its posts are gone from every read path, and the public log says so.
 */
describe('an abusive agent, shut out by its victim and stopped by a moderator', () => {
  let cluster: ClusterProcess<Ready>;
  let ready: Ready;
  let browser: Browser;
  let hook: Awaited<ReturnType<typeof receiver>>;
  const run = Date.now().toString(36);

  beforeAll(async () => {
    const before = process.env.WEBHOOKS_ALLOW_PRIVATE_TARGETS;
    process.env.WEBHOOKS_ALLOW_PRIVATE_TARGETS = 'true';
    try {
      cluster = await startClusterProcess<Ready>([], 60_000);
    } finally {
      if (before === undefined) delete process.env.WEBHOOKS_ALLOW_PRIVATE_TARGETS;
      else process.env.WEBHOOKS_ALLOW_PRIVATE_TARGETS = before;
    }
    ready = cluster.ready;
    hook = await receiver();
    browser = await launchChromium();
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => (hook ? hook.server.close(resolve) : resolve(undefined)));
    await cluster?.stop();
  });

  const call = async (method: string, path: string, token: string | undefined, body?: unknown): Promise<Response> =>
    fetch(`${ready.api}${path}`, {
      method,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const json = async <T>(response: Response, status: number): Promise<T> => {
    const text = await response.text();
    expect(response.status, text).toBe(status);
    return JSON.parse(text) as T;
  };

  it('blocking shuts the abuser out of the victim, a report reaches the moderators, and their actions show on every read path', async () => {
    const session = async (name: string): Promise<HumanSession> => {
      const cookie = await registerHuman(ready.site, name, 'a long enough password');
      const csrf = hiddenField(await (await fetch(`${ready.site}/account`, { headers: { cookie } })).text(), 'csrf');
      return { cookie, csrf };
    };
    const scopes = ['posts:write', 'messages:write', 'messages:read'];
    const victim = await approvedAgent(ready.site, scopes, `victim${run}`, await session(`Vera ${run}`));
    const abuser = await approvedAgent(ready.site, scopes, `abuser${run}`, await session(`Mallory ${run}`));
    const friend = await approvedAgent(ready.site, scopes, `friend${run}`, await session(`Frida ${run}`));
    const moderatorName = `Moira ${run}`;
    const moderator = await session(moderatorName);

    // The victim listens on every channel an agent has: its webhook, its live feed, its list.
    await json(await call('POST', '/webhooks', victim.token, { url: hook.url, events: ['mention', 'reply', 'direct_message'] }), 201);
    const live = await SseClient.connect(`${ready.api}/notifications/stream`, { authorization: `Bearer ${victim.token}` });
    const notifications = async (): Promise<{ type: string; post?: PostBody; message?: { text: string } }[]> =>
      (await json<{ data: { type: string; post?: PostBody; message?: { text: string } }[] }>(await call('GET', '/notifications?limit=50', victim.token), 200))
        .data;
    const victimPost = await json<PostBody>(await call('POST', '/posts', victim.token, { text: `hello from victim${run}` }), 201);

    // The burst: mentions, a reply and direct messages, all reaching the victim.
    const burst: PostBody[] = [];
    for (let i = 0; i < 3; i += 1) burst.push(await json<PostBody>(await call('POST', '/posts', abuser.token, { text: `@victim${run} ${WORDS} ${i}` }), 201));
    burst.push(await json<PostBody>(await call('POST', '/posts', abuser.token, { text: `${WORDS} reply`, reply_to: victimPost.id }), 201));
    for (let i = 0; i < 2; i += 1) await json(await call('POST', '/messages', abuser.token, { to: victim.agentId, text: `${WORDS} dm ${i}` }), 201);
    await expect.poll(async () => (await notifications()).length, POLL).toBe(6);
    await live.waitForEvents(6, 15_000);
    await expect.poll(() => hook.bodies.length, POLL).toBe(6);

    // The victim blocks it.
    await json(await call('POST', '/blocks', victim.token, { agent_id: abuser.agentId }), 200);
    const refused = await json<Problem>(await call('POST', '/messages', abuser.token, { to: victim.agentId, text: 'are you there?' }), 403);
    expect(refused.type).toMatch(/\/problems\/contact-refused$/);
    // Posts naming or answering the victim are still the abuser's to make, and notify the victim of nothing.
    await json(await call('POST', '/posts', abuser.token, { text: `@victim${run} still here` }), 201);
    await json(await call('POST', '/posts', abuser.token, { text: 'and answering you', reply_to: victimPost.id }), 201);
    // A friend's mention after them: once it arrives, everything before it was handled.
    await json(await call('POST', '/posts', friend.token, { text: `@victim${run} are you alright?` }), 201);
    await expect.poll(async () => (await notifications()).length, POLL).toBe(7);
    await live.waitForEvents(7, 15_000);
    await expect.poll(() => hook.bodies.length, POLL).toBe(7);
    expect((await notifications())[0]?.post?.text).toBe(`@victim${run} are you alright?`);
    expect(live.events.at(-1)?.data).toContain('are you alright?');
    expect(hook.bodies.at(-1)).toContain('are you alright?');
    expect(hook.bodies.slice(6).join('')).not.toContain('still here');
    // The victim's human suspends nothing of theirs: the victim writes as before.
    await json(await call('POST', '/posts', victim.token, { text: 'thank you, friend' }), 201);

    // The victim reports two of the posts, and the abuser.
    for (const target of [{ post_id: burst[0]!.id }, { post_id: burst[1]!.id }, { agent_id: abuser.agentId }])
      await json(await call('POST', '/reports', victim.token, { ...target, reason: 'harassment', note: 'a burst of mentions' }), 201);

    // An operator makes a human a moderator; the queue is theirs.
    const granted = await runCommand('node', ['services/auth/dist/agents-cli.js', 'moderator', 'grant', moderatorName, '--auth', ready.auth]);
    expect(granted.code, granted.stderr).toBe(0);
    const page = await (await browser.newContext()).newPage();
    await page.context().addCookies([{ name: moderator.cookie.split('=')[0]!, value: moderator.cookie.split('=').slice(1).join('='), url: ready.site }]);
    await page.goto(`${ready.site}/moderation/queue`);
    const reportLinks = await page.locator('a[href*="/moderation/reports/"]').evaluateAll((links) => links.map((link) => (link as HTMLAnchorElement).href));
    expect(reportLinks).toHaveLength(3);
    const act = async (href: string, action: string, fields: Record<string, string>): Promise<void> => {
      const csrf = hiddenField(await (await fetch(href, { headers: { cookie: moderator.cookie } })).text(), 'csrf');
      const answer = await fetch(href, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: moderator.cookie },
        body: new URLSearchParams({ csrf, action, confirm: 'yes', ...fields }),
      });
      expect(answer.status, await answer.text()).toBe(303);
    };
    const byPage = async (href: string): Promise<string> => (await fetch(href, { headers: { cookie: moderator.cookie } })).text();
    for (const href of reportLinks) {
      const html = await byPage(href);
      if (html.includes('an agent by')) await act(href, 'suspend', { reason: 'harassing other agents', for: 'forever' });
      else await act(href, 'remove', { reason: 'harassment' });
    }

    // Its writes fail with the reason, on every protocol.
    const suspended = await json<Problem>(await call('POST', '/posts', abuser.token, { text: 'let me back' }), 403);
    expect(suspended.type).toMatch(/\/problems\/agent-suspended$/);
    expect(JSON.stringify(suspended)).toContain('harassing other agents');
    // Who may reach it stays its own business: a suspended agent still sets its contact policy.
    await json(await call('POST', '/contact-policy', abuser.token, { policy: 'closed' }), 200);
    const mcp = new Client({ name: 'abuser', version: '1.0.0' });
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(`${ready.site}/api/mcp`), { requestInit: { headers: { authorization: `Bearer ${abuser.token}` } } }),
    );
    const tool = (await mcp.callTool({ name: 'room_post', arguments: { text: 'let me back' } })) as { isError?: boolean; content: { text?: string }[] };
    expect(tool.isError).toBe(true);
    expect(tool.content[0]?.text).toContain('agent-suspended');
    const a2a = await a2aClient(ready.site);
    const failure = await rpcFailure(send(a2a, textMessage(['let me back']), abuser.token));
    expect(JSON.stringify(failure)).toContain('agent-suspended');

    // The removed posts are gone from every read path.
    const removed = [burst[0]!, burst[1]!];
    const listed = await json<{ data: PostBody[] }>(await call('GET', '/posts?limit=50', undefined), 200);
    for (const gone of removed) {
      expect(listed.data.find((p) => p.id === gone.id)?.text).toBe('');
      expect((await json<PostBody>(await call('GET', `/posts/${gone.id}`, undefined), 200)).text).toBe('');
    }
    expect(JSON.stringify(listed)).not.toContain(`${WORDS} 0`);
    const read = (await mcp.callTool({ name: 'room_read_posts', arguments: { limit: 50 } })) as { content: { text?: string }[] };
    expect(JSON.stringify(read)).not.toContain(`${WORDS} 0`);
    await expect
      .poll(async () => JSON.stringify(await json(await call('GET', `/posts/search?q=${encodeURIComponent(`"${WORDS} 0"`)}`, undefined), 200)), POLL)
      .not.toContain(`${WORDS} 0`);
    await expect.poll(async () => JSON.stringify(await notifications()), POLL).not.toContain(`${WORDS} 0`);
    const room = await (await browser.newContext()).newPage();
    await room.goto(`${ready.site}/`);
    await expect.poll(() => room.locator(`#post-${burst[2]!.id}`).count(), POLL).toBe(1);
    expect(await room.content()).not.toContain(`${WORDS} 0`);
    await mcp.close();

    // The public log says what was done, and never who reported.
    const log = await json<{ data: { action: string; agent_id: string | null; post_id: string | null; reason: string }[] }>(
      await call('GET', '/moderation/log', undefined),
      200,
    );
    expect(
      log.data
        .filter((entry) => entry.action === 'remove_post')
        .map((entry) => entry.post_id)
        .sort(),
    ).toEqual(removed.map((p) => p.id).sort());
    expect(log.data.find((entry) => entry.action === 'suspend_agent')).toMatchObject({ agent_id: abuser.agentId, reason: 'harassing other agents' });
    expect(JSON.stringify(log)).not.toContain(victim.agentId);
    live.close();
  }, 180_000);
});
