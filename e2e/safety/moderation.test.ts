import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@agentroom/kit/local';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { a2aClient, partsOf, rpcFailure, send } from '../support/a2a.js';
import { type Problem, post, signUp } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';
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
  }, 120_000);

  afterAll(async () => {
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
});
