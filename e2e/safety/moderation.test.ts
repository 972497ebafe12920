import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serviceClient } from '@agentroom/kit/grpc';
import { freePort } from '@agentroom/kit/local';
import { authProto, recordProto } from '@agentroom/proto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { a2aClient, partsOf, rpcFailure, send } from '../support/a2a.js';
import { type Problem, post, signUp } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { signInCookie } from '../support/mcp-host.js';
import { callTool, mcpClient, toolProblem } from '../support/mcp.js';

interface Report {
  id: string;
  status: string;
  post_id: string | null;
  agent_id: string;
  reason: string;
  note: string;
  created_at: string;
}

interface PostBody {
  id: string;
  agentId: string;
}

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
const grace = { name: 'Grace Hopper', password: 'cobol forever and ever' };
const margaret = { name: 'Margaret Hamilton', password: 'apollo guidance computer' };

interface LogEntry {
  id: string;
  at: string;
  action: string;
  agent_id: string | null;
  post_id: string | null;
  reason: string;
  until: string | null;
}

/**
 * Reports and the moderation log (docs/decisions.md §44), end to end on the embedded room with
 * the record in a DATA_DIR folder: an agent reports a post or an agent over REST, MCP and A2A, each
 * through its SDK client; reports reach the record once per idempotency key; the public log says what
 * was done and never who reported.
 */
describe('reports and the moderation log', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'moderation-e2e-'));
  let port: number;
  let app: Embedded;
  let victim: string;
  let spammer: string;
  let spammerId: string;
  let spam: PostBody;
  let mcp: Client;
  let victimId: string;
  let browser: Browser;
  let page: Page;
  let moderatorId: string;

  const start = async (): Promise<Embedded> =>
    startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(port), QUOTA_PER_ADDRESS: '1000000', DATA_DIR: dataDir });

  const report = (token: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${app.urls.baseUrl}/reports`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...headers },
      body: JSON.stringify(body),
    });

  beforeAll(async () => {
    port = await freePort();
    app = await start();
    victim = (await signUp(app, ['posts:write', 'messages:read'], 'victim', ada)).token;
    spammer = (await signUp(app, ['posts:write'], 'spammer', grace)).token;
    const made = await post(app, spammer, { text: 'buy cheap watches at example.com, buy now' });
    expect(made.status).toBe(201);
    spam = (await made.json()) as PostBody;
    spammerId = spam.agentId;
    mcp = await mcpClient(app, victim);
    const own = await post(app, victim, { text: 'hello, room' });
    victimId = ((await own.json()) as PostBody).agentId;
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await mcp?.close();
    await app?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('files a report of a post over REST: 201 with the report, its author reported with it, once per Idempotency-Key', async () => {
    const body = { post_id: spam.id, reason: 'spam', note: 'the same link again and again' };
    const first = await report(victim, body, { 'idempotency-key': 'report-spam-1' });
    expect(first.status, await first.clone().text()).toBe(201);
    const filed = (await first.json()) as Report;
    expect(filed).toEqual({
      id: expect.stringMatching(/^rep_/) as string,
      status: 'open',
      post_id: spam.id,
      agent_id: spammerId,
      reason: 'spam',
      note: 'the same link again and again',
      created_at: expect.any(String) as string,
    });
    const again = await report(victim, body, { 'idempotency-key': 'report-spam-1' });
    expect(((await again.json()) as Report).id).toBe(filed.id);
    // Without a key, the same words are a report of their own.
    const other = (await (await report(victim, body)).json()) as Report;
    expect(other.id).not.toBe(filed.id);
  });

  it('reports an agent, and refuses what names nothing, both or neither, a reason off the list, and a call without a token', async () => {
    const agent = await report(victim, { agent_id: spammerId, reason: 'harassment' });
    expect(agent.status).toBe(201);
    expect((await agent.json()) as Report).toMatchObject({ post_id: null, agent_id: spammerId, reason: 'harassment', note: '' });

    const refused = async (token: string | undefined, body: unknown, status: number): Promise<Problem> => {
      const response = await report(token, body);
      expect(response.status, await response.clone().text()).toBe(status);
      return (await response.json()) as Problem;
    };
    expect((await refused(victim, { post_id: '1-0', reason: 'spam' }, 404)).type).toMatch(/post-not-found$/);
    expect((await refused(victim, { post_id: 'not a post', reason: 'spam' }, 404)).type).toMatch(/post-not-found$/);
    expect((await refused(victim, { agent_id: 'a_nobody000', reason: 'spam' }, 404)).type).toMatch(/agent-not-found$/);
    expect((await refused(victim, { post_id: spam.id, agent_id: spammerId, reason: 'spam' }, 400)).parameter).toBe('post_id');
    expect((await refused(victim, { reason: 'spam' }, 400)).parameter).toBe('post_id');
    expect((await refused(victim, { post_id: spam.id, reason: 'boring' }, 400)).parameter).toBe('reason');
    expect((await refused(victim, { post_id: spam.id, reason: 'spam', note: 'x'.repeat(1_001) }, 400)).parameter).toBe('note');
    expect((await refused(undefined, { post_id: spam.id, reason: 'spam' }, 401)).code).toBe('no_token');
  });

  it('files a report with the MCP tool room_report, through the SDK client', async () => {
    const result = await callTool(mcp, 'room_report', { post_id: spam.id, reason: 'spam', note: 'seen on MCP', idempotency_key: 'mcp-report-1' });
    expect(result.isError).not.toBe(true);
    expect(result.structuredContent).toMatchObject({ post_id: spam.id, agent_id: spammerId, reason: 'spam', status: 'open' });
    expect(result.content[0]?.text).toContain(`Reported post ${spam.id}`);
    const again = await callTool(mcp, 'room_report', { post_id: spam.id, reason: 'spam', note: 'seen on MCP', idempotency_key: 'mcp-report-1' });
    expect(again.structuredContent?.id).toBe(result.structuredContent?.id);
    expect(toolProblem(await callTool(mcp, 'room_report', { agent_id: 'a_nobody000', reason: 'spam' })).type).toMatch(/agent-not-found$/);
  });

  it('files a report with the A2A skill "report", through the SDK client; the card offers it', async () => {
    const client = await a2aClient(`${app.urls.siteUrl}/`);
    const card = await client.getAgentCard();
    expect(card.skills.map((skill) => skill.id)).toContain('report');
    const message = (value: Record<string, unknown>, messageId: string) => ({
      messageId,
      contextId: '',
      taskId: '',
      role: 1,
      parts: [{ content: { $case: 'data' as const, value }, metadata: undefined, filename: '', mediaType: 'application/json' }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    });
    const answer = partsOf(
      await send(client, message({ skill: 'report', agent_id: spammerId, reason: 'impersonation', note: 'on A2A' }, 'a2a-report-1'), victim),
    );
    const filed = answer.data.report as Report;
    expect(filed).toMatchObject({ post_id: null, agent_id: spammerId, reason: 'impersonation', note: 'on A2A', status: 'open' });
    expect(answer.text).toContain(`Reported agent ${spammerId}`);
    // The same message again (same id) files nothing more.
    const again = partsOf(
      await send(client, message({ skill: 'report', agent_id: spammerId, reason: 'impersonation', note: 'on A2A' }, 'a2a-report-1'), victim),
    );
    expect((again.data.report as Report).id).toBe(filed.id);
    const unknown = await rpcFailure(send(client, message({ skill: 'report', post_id: '1-0', reason: 'spam' }, 'a2a-report-2'), victim));
    expect(unknown.problem.type).toMatch(/post-not-found$/);
    const anonymous = await rpcFailure(send(client, message({ skill: 'report', post_id: spam.id, reason: 'spam' }, 'a2a-report-3')));
    expect(anonymous.problem.code).toBe('no_token');
  });

  it('serves the public moderation log with no token, empty until a moderator acts', async () => {
    const response = await fetch(`${app.urls.baseUrl}/moderation/log`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ object: 'list', data: [], has_more: false, next_cursor: null });
    const tool = await callTool(mcp, 'room_moderation_log', {});
    expect(tool.content[0]?.text).toBe('The moderators have not acted yet.');
  });

  it('refuses the queue to a signed-in human who is no moderator: a 403 moderator-required page, and no action', async () => {
    const cookie = await signInCookie(app, ada);
    const queue = await fetch(`${app.urls.siteUrl}/moderation/queue`, { headers: { cookie, accept: 'text/html' } });
    expect(queue.status).toBe(403);
    expect(queue.headers.get('content-type')).toMatch(/^text\/html/);
    expect(queue.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(await queue.text()).toContain('Moderators only');
    const { data } = (await (await fetch(`${app.urls.baseUrl}/moderation/log`)).json()) as { data: LogEntry[] };
    const open = await fetch(`${app.urls.siteUrl}/moderation/queue`, { redirect: 'manual' });
    // Signed out: sent to sign in first.
    expect(open.status).toBe(303);
    expect(open.headers.get('location')).toContain('/signin?next=');
    expect(data).toEqual([]);
  });

  it("a moderator granted over auth's gRPC sees the open reports in chromium, with the post and its thread, and dismisses one", async () => {
    const human = await app.auth.humans.register(margaret.name, margaret.password);
    moderatorId = human.id;
    const auth = serviceClient(authProto().AuthService, `127.0.0.1:${app.authPort}`);
    try {
      expect(await auth.call('setModerator', { humanName: margaret.name, moderator: true })).toMatchObject({ humanName: margaret.name, moderator: true });
    } finally {
      auth.close();
    }
    browser = await launchChromium();
    page = await (await browser.newContext()).newPage();
    await page.goto(`${app.urls.siteUrl}/signin?next=${encodeURIComponent('/moderation/queue')}`);
    await page.getByLabel('Name', { exact: true }).fill(margaret.name);
    await page.getByLabel('Password', { exact: true }).fill(margaret.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/moderation\/queue$/);
    await expect.poll(() => page.locator('h1').textContent()).toBe('Moderation queue');
    expect(await page.locator('.lede').textContent()).toMatch(/^\d+ open reports, oldest first/);
    const reports = page.locator('ol.reports > li');
    // Two of the post over REST, one of the agent, one over MCP, one over A2A.
    expect(await reports.count()).toBe(5);
    expect(await reports.first().textContent()).toContain('the same link again and again');

    await reports
      .first()
      .getByRole('link', { name: /Review this report/ })
      .click();
    await page.waitForURL(/\/moderation\/reports\/rep_/);
    expect(await page.locator('#post-heading + ul').textContent()).toContain('buy cheap watches');
    expect(await page.locator('#thread-heading').count()).toBe(1);
    // The agent's history: its posts (from the record) and every report against it.
    expect(await page.locator('ul.history').textContent()).toContain('buy cheap watches');
    expect(await page.locator('ul.reports-against > li').count()).toBe(5);
    await page.getByLabel('Note (optional, for the audit)').fill('a duplicate of another report');
    await page.getByRole('button', { name: 'Dismiss the report' }).click();
    // The question first; nothing is done until it is answered.
    await expect.poll(() => page.locator('h1').textContent()).toBe('Dismiss this report?');
    await page.getByRole('button', { name: 'Dismiss', exact: true }).click();
    await page.waitForURL(/\/moderation\/queue\?done=dismiss$/);
    expect(await page.getByRole('status').textContent()).toBe('Dismissed.');
    expect(await page.locator('ol.reports > li').count()).toBe(4);
  });

  it("acts only on a form of the moderator's own session: a stale CSRF token, a bearer token or another human is refused, and nothing changes", async () => {
    const queue = await fetch(`${app.urls.baseUrl}/moderation/log`);
    const logBefore = await queue.text();
    const cookie = await signInCookie(app, margaret);
    const page = await fetch(`${app.urls.siteUrl}/moderation/queue`, { headers: { cookie } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(page.headers.get('cache-control')).toBe('no-store');
    const html = await page.text();
    const reportId = /\/moderation\/reports\/(rep_[A-Za-z0-9_-]+)/.exec(html)?.[1] ?? '';
    const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
    const act = (headers: Record<string, string>, body: Record<string, string>): Promise<Response> =>
      fetch(`${app.urls.siteUrl}/moderation/reports/${reportId}`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(body).toString(),
      });
    const confirmed = { action: 'suspend', reason: 'forged', for: 'forever', confirm: 'yes' };
    for (const stale of [await act({ cookie }, { ...confirmed, csrf: 'not-the-token' }), await act({ cookie }, confirmed)]) {
      expect(stale.status).toBe(400);
      expect(((await stale.json()) as Problem).type).toMatch(/csrf-invalid$/);
    }
    expect((await act({ cookie, authorization: `Bearer ${victim}` }, { ...confirmed, csrf })).status).toBe(403);
    const other = await signInCookie(app, ada);
    const refused = await act({ cookie: other }, { ...confirmed, csrf });
    expect(refused.status).toBe(403);
    // Without confirm=yes, the question: nothing done yet.
    const question = await act({ cookie }, { action: 'suspend', reason: 'asked first', for: '1', csrf });
    expect(question.status).toBe(200);
    expect(await question.text()).toContain('Suspend spammer?');
    expect(await (await fetch(`${app.urls.baseUrl}/moderation/log`)).text()).toBe(logBefore);
    // A report id that names nothing.
    expect((await fetch(`${app.urls.siteUrl}/moderation/reports/rep_nothing`, { headers: { cookie } })).status).toBe(404);
  });

  it('removes a reported post from the queue: gone from the room, listed in the public log without who reported or acted', async () => {
    await page
      .locator('ol.reports > li', { hasText: 'the same link again and again' })
      .first()
      .getByRole('link', { name: /Review this report/ })
      .click();
    await page.getByLabel(/^Reason \(optional\)/).fill('commercial spam');
    await page.getByRole('button', { name: 'Remove the post' }).click();
    await expect.poll(() => page.locator('h1').textContent()).toBe('Remove this post?');
    await page.getByRole('button', { name: 'Remove the post' }).click();
    await page.waitForURL(/\/moderation\/queue\?done=remove$/);

    const posts = (await (await fetch(`${app.urls.baseUrl}/posts`, { headers: { 'cache-control': 'no-cache' } })).json()) as {
      data: { id: string; text: string }[];
    };
    expect(JSON.stringify(posts)).not.toContain('buy cheap watches');
    const log = (await (await fetch(`${app.urls.baseUrl}/moderation/log`)).json()) as { data: LogEntry[] };
    expect(log.data[0]).toMatchObject({ action: 'remove_post', post_id: spam.id, agent_id: spammerId, reason: 'commercial spam', until: null });
    expect(JSON.stringify(log)).not.toContain(victimId);
    expect(JSON.stringify(log)).not.toContain(moderatorId);
  });

  it('suspends the reported agent room-wide for a week with a reason: its token says so, and the log lists it with its end', async () => {
    await page.goto(`${app.urls.siteUrl}/moderation/queue`);
    await page
      .locator('ol.reports > li', { hasText: 'Harassment' })
      .first()
      .getByRole('link', { name: /Review this report/ })
      .click();
    await page.getByLabel(/^Reason, shown in the moderation log/).fill('harassing other agents');
    await page.getByLabel('For', { exact: true }).selectOption('7');
    await page.getByRole('button', { name: /^Suspend / }).click();
    await expect.poll(() => page.locator('h1').textContent()).toBe('Suspend spammer?');
    await page.getByRole('button', { name: 'Suspend', exact: true }).click();
    await page.waitForURL(/\/moderation\/queue\?done=suspend$/);

    const auth = serviceClient(authProto().AuthService, `127.0.0.1:${app.authPort}`);
    try {
      const principal = await auth.call('authenticateToken', { token: spammer });
      expect(principal.suspension).toMatchObject({ by: 'moderator', reason: 'harassing other agents' });
      const until = Date.parse(principal.suspension?.until ?? '');
      expect(until - Date.now()).toBeGreaterThan(6.9 * 86_400_000);
    } finally {
      auth.close();
    }
    const log = (await (await fetch(`${app.urls.baseUrl}/moderation/log`)).json()) as { data: LogEntry[] };
    expect(log.data).toHaveLength(2);
    expect(log.data[0]).toMatchObject({ action: 'suspend_agent', agent_id: spammerId, post_id: null, reason: 'harassing other agents' });
    expect(Date.parse(log.data[0]?.until ?? '') - Date.now()).toBeGreaterThan(6.9 * 86_400_000);
    // Neither who reported nor who acted, nor the dismissed report.
    expect(JSON.stringify(log)).not.toContain(victimId);
    expect(JSON.stringify(log)).not.toContain(moderatorId);
  });

  it('shows the moderation log page in chromium: what was done, when and why; never who reported nor who acted', async () => {
    const reader = await (await browser.newContext()).newPage();
    await reader.goto(`${app.urls.siteUrl}/moderation`);
    expect(await reader.locator('h1').textContent()).toBe('Moderation log');
    const entries = reader.locator('ol.moderation-log > li');
    expect(await entries.count()).toBe(2);
    expect(await entries.nth(0).textContent()).toContain('Agent suspended');
    expect(await entries.nth(0).textContent()).toContain('harassing other agents');
    expect(await entries.nth(0).textContent()).toContain('spammer');
    expect(await entries.nth(1).textContent()).toContain('Post removed');
    expect(await entries.nth(1).textContent()).toContain('commercial spam');
    const text = (await reader.locator('main').textContent()) ?? '';
    for (const secret of [victimId, 'victim', moderatorId, margaret.name, 'the same link again and again']) expect(text).not.toContain(secret);
  });

  it('keeps reports and the audit across a restart of the record (PGlite in DATA_DIR)', async () => {
    const before = (await (await fetch(`${app.urls.baseUrl}/moderation/log`)).json()) as { data: LogEntry[] };
    await mcp.close();
    await app.stop();
    app = await start();
    mcp = await mcpClient(app);
    const after = (await (await fetch(`${app.urls.baseUrl}/moderation/log`)).json()) as { data: LogEntry[] };
    expect(after.data.map((entry) => entry.id)).toEqual(before.data.map((entry) => entry.id));
    expect(after.data).toHaveLength(2);
    // The whole audit, beyond the public log: each report filed by its agent, the dismissal and the suspension by the moderator.
    const record = serviceClient(recordProto().RecordService, `127.0.0.1:${app.recordPort}`);
    try {
      const audit = await record.call('listAudit', { limit: 50 });
      const actions = audit.entries.map((entry) => `${entry.action} by ${entry.actorKind} ${entry.actorId}`);
      expect(actions.filter((line) => line === `create_report by agent ${victimId}`)).toHaveLength(5);
      expect(actions).toContain(`dismiss_report by moderator ${moderatorId}`);
      expect(actions).toContain(`suspend_agent by moderator ${moderatorId}`);
      expect(actions).toContain(`remove_post by moderator ${moderatorId}`);
    } finally {
      record.close();
    }
  }, 60_000);
});
