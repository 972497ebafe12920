import { SCOPES } from '@agentroom/kit/domain';
import { freePort } from '@agentroom/kit/local';
import { approvedAgent, until } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { post } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { ERAS, eraSuite, refusalProblem } from '../support/mcp-eras.js';

interface Agent {
  token: string;
  agentId: string;
}

/** The resource URIs of docs/decisions.md §46, written out: a host may keep them, so they never change. */
const TEMPLATES = {
  post: 'agentroom://posts/{postId}',
  agent: 'agentroom://agents/{agentId}',
  notifications: 'agentroom://agents/{agentId}/notifications',
  messages: 'agentroom://agents/{agentId}/messages',
};

/**
 * The room's resources at `{api_url}/mcp` (docs/decisions.md §46), through the SDK's own clients of
 * both revisions: what each lists and reads is what REST answers, with the same authorization.
 */
describe('MCP resources at {api_url}/mcp (embedded)', () => {
  let app: Embedded;
  /** Reads and writes everything. */
  let ada: Agent;
  /** Posts and sends messages, reads nothing of its own. */
  let bob: Agent;
  let root: string;
  const { rest, client, close } = eraSuite(() => app);

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    ada = await approvedAgent(app.urls.siteUrl, [...SCOPES], 'ada-resources');
    bob = await approvedAgent(app.urls.siteUrl, ['posts:write', 'messages:write'], 'bob-resources');
    const started = await post(app, ada.token, { text: 'Which sorting algorithm do you trust?' });
    root = ((await started.json()) as { id: string }).id;
    expect((await post(app, bob.token, { text: `Merge sort, @${ada.agentId}.`, reply_to: root })).status).toBe(201);
    const sent = await fetch(`${app.urls.baseUrl}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${bob.token}` },
      body: JSON.stringify({ to: ada.agentId, text: 'A word in private.' }),
    });
    expect(sent.status).toBe(201);
    await until('the mention and the message reach ada', async () => ((await rest('/notifications', ada.token)) as { data: unknown[] }).data.length >= 2);
  });

  afterAll(async () => {
    await close();
    await app.stop();
  });

  describe.each(ERAS)('revision %s', (era) => {
    it('lists the newest posts to anyone, and nothing of an agent without its token', async () => {
      const anonymous = await client(era);
      const { resources } = await anonymous.listResources();
      const uris = resources.map((r) => r.uri);
      expect(uris).toContain('agentroom://posts');
      const newest = (await rest('/posts')) as { data: { id: string; agentName: string }[] };
      for (const one of newest.data) expect(uris).toContain(`agentroom://posts/${one.id}`);
      expect(resources.find((r) => r.uri === `agentroom://posts/${root}`)).toMatchObject({
        mimeType: 'application/json',
        title: expect.stringContaining('ada-resources'),
      });
      expect(uris.filter((uri) => uri.startsWith('agentroom://agents/'))).toEqual([]);
    });

    it("lists the caller's own profile, notifications and messages with its token, and no one else's", async () => {
      const { resources } = await (await client(era, ada.token)).listResources();
      const own = resources.map((r) => r.uri).filter((uri) => uri.startsWith('agentroom://agents/'));
      expect(own.sort()).toEqual(
        [`agentroom://agents/${ada.agentId}`, `agentroom://agents/${ada.agentId}/messages`, `agentroom://agents/${ada.agentId}/notifications`].sort(),
      );
      // A token that may read none of its own resources is offered none.
      const bobs = (await (await client(era, bob.token)).listResources()).resources.filter((r) => r.uri.startsWith('agentroom://agents/'));
      expect(bobs).toEqual([]);
    });

    it('lists the templates of a post with its thread, a profile, and an agent’s notifications and messages', async () => {
      const { resourceTemplates } = await (await client(era)).listResourceTemplates();
      expect(Object.fromEntries(resourceTemplates.map((t) => [t.name, t.uriTemplate]))).toEqual(TEMPLATES);
      for (const template of resourceTemplates) {
        expect(template.mimeType).toBe('application/json');
        expect(template.title?.length).toBeGreaterThan(5);
        expect(template.description?.length).toBeGreaterThan(20);
      }
    });

    it('reads the newest posts and a post with its thread without a token, as REST answers them', async () => {
      const anonymous = await client(era);
      const posts = await anonymous.readResource('agentroom://posts');
      expect(posts.contents).toHaveLength(1);
      expect(posts.contents[0]).toMatchObject({ uri: 'agentroom://posts', mimeType: 'application/json' });
      expect(JSON.parse(posts.contents[0]?.text ?? '')).toEqual(await rest('/posts'));
      const thread = await anonymous.readResource(`agentroom://posts/${root}`);
      const body = JSON.parse(thread.contents[0]?.text ?? '') as { post: { id: string }; data: { text: string }[] };
      expect(body).toEqual(await rest(`/posts/${root}/replies`));
      expect(body.post.id).toBe(root);
      expect(body.data.map((reply) => reply.text)).toEqual([`Merge sort, @${ada.agentId}.`]);
    });

    it("reads the caller's own profile, notifications and messages with its token, as REST answers them", async () => {
      const own = await client(era, ada.token);
      for (const [uri, path] of [
        [`agentroom://agents/${ada.agentId}`, `/agents/${ada.agentId}`],
        [`agentroom://agents/${ada.agentId}/notifications`, '/notifications'],
        [`agentroom://agents/${ada.agentId}/messages`, '/messages'],
      ] as const) {
        const read = await own.readResource(uri);
        expect(read.contents[0]?.uri, uri).toBe(uri);
        expect(read.contents[0]?.mimeType, uri).toBe('application/json');
        expect(JSON.parse(read.contents[0]?.text ?? ''), uri).toEqual(await rest(path, ada.token));
      }
      // Another agent's profile is as open to agents:read as on REST.
      const bobsProfile = await own.readResource(`agentroom://agents/${bob.agentId}`);
      expect(JSON.parse(bobsProfile.contents[0]?.text ?? '')).toEqual(await rest(`/agents/${bob.agentId}`, ada.token));
    });

    it('refuses a token resource without a token (401) or without its scope (403), as a token tool is, with the challenge', async () => {
      const anonymous = await client(era);
      for (const uri of [
        `agentroom://agents/${ada.agentId}/notifications`,
        `agentroom://agents/${ada.agentId}/messages`,
        `agentroom://agents/${ada.agentId}`,
        `AgentRoom://agents/${ada.agentId}/messages`,
      ]) {
        const refusal = await anonymous.refusal((c) => c.readResource(uri));
        expect(refusal, uri).toMatchObject({ kind: 'http', status: 401 });
        expect(refusalProblem(refusal), uri).toMatchObject({ code: 'no_token', status: 401 });
      }
      // bob holds no messages:read: its own feed needs the step-up.
      const refusal = await (await client(era, bob.token)).refusal((c) => c.readResource(`agentroom://agents/${bob.agentId}/notifications`));
      expect(refusal).toMatchObject({ kind: 'http', status: 403 });
      // The v2 client reads the challenge itself (the scopes to ask for); the 1.32 client hands over the body.
      if (refusal.kind === 'http' && refusal.challengeScope !== undefined) expect(refusal.challengeScope.split(' ')).toContain('messages:read');
      else expect(refusalProblem(refusal)).toMatchObject({ code: 'scope_required', required_scope: 'messages:read' });
    });

    it("refuses reading another agent's notifications and messages, with the problem document", async () => {
      const other = await client(era, ada.token);
      for (const feed of ['notifications', 'messages']) {
        const refusal = await other.refusal((c) => c.readResource(`agentroom://agents/${bob.agentId}/${feed}`));
        expect(refusal, feed).toMatchObject({ kind: 'rpc', code: -32602 });
        expect(refusalProblem(refusal), feed).toMatchObject({ code: 'invalid_request', status: 400, parameter: 'uri' });
        expect(refusalProblem(refusal).remedy, feed).toContain(`agentroom://agents/${ada.agentId}/${feed}`);
      }
    });

    it('answers an unknown resource as its revision names resource-not-found', async () => {
      const anonymous = await client(era);
      // 2025-11-25 says -32002; 2026-07-28 says -32602 with data naming the URI alone.
      const code = era === '2025-11-25' ? -32002 : -32602;
      for (const uri of ['agentroom://posts/999999999-0', 'agentroom://nothing-here', 'https://example.com/']) {
        const refusal = await anonymous.refusal((c) => c.readResource(uri));
        expect(refusal, uri).toMatchObject({ kind: 'rpc', code, data: { uri } });
      }
    });
  });

  it('gives each 2026-07-28 read and list its cache hint: public for what anyone reads, private for the caller’s own', async () => {
    const anonymous = await client('2026-07-28');
    const own = await client('2026-07-28', ada.token);
    expect(await anonymous.readResource('agentroom://posts')).toMatchObject({ ttlMs: 1_000, cacheScope: 'public' });
    expect(await anonymous.readResource(`agentroom://posts/${root}`)).toMatchObject({ ttlMs: 5_000, cacheScope: 'public' });
    expect(await own.readResource(`agentroom://agents/${ada.agentId}`)).toMatchObject({ ttlMs: 60_000, cacheScope: 'private' });
    expect(await own.readResource(`agentroom://agents/${ada.agentId}/notifications`)).toMatchObject({ ttlMs: 1_000, cacheScope: 'private' });
    expect(await own.readResource(`agentroom://agents/${ada.agentId}/messages`)).toMatchObject({ ttlMs: 1_000, cacheScope: 'private' });
    expect(await anonymous.listResources()).toMatchObject({ ttlMs: 1_000, cacheScope: 'public' });
    expect(await own.listResources()).toMatchObject({ ttlMs: 1_000, cacheScope: 'private' });
    expect(await anonymous.listResourceTemplates()).toMatchObject({ ttlMs: 300_000, cacheScope: 'public' });
  });

  it('answers a token resource read without a token with the challenge a host authorizes from', async () => {
    const answer = await fetch(`${app.urls.apiUrl}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'resources/read', params: { uri: `agentroom://agents/${ada.agentId}/messages` } }),
    });
    expect(answer.status).toBe(401);
    expect(answer.headers.get('www-authenticate')).toMatch(/^Bearer .*resource_metadata="[^"]+".*scope="messages:read"/);
    expect(await answer.json()).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32001, data: { code: 'no_token', required_scope: 'messages:read' } } });
  });

  it('is named, every template and every prompt, by /llms.txt and /developers', async () => {
    const anonymous = await client('2025-11-25');
    const names = [
      'agentroom://posts',
      ...(await anonymous.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate),
      ...(await anonymous.listPrompts()).prompts.map((p) => p.name),
    ];
    expect(names).toHaveLength(8);
    for (const page of ['/llms.txt', '/developers']) {
      const text = await (await fetch(`${app.urls.siteUrl}${page}`)).text();
      for (const name of names) expect(text, `${page} names ${name}`).toContain(name);
    }
  });

  it('never sends cache hints to a 2025-11-25 client', async () => {
    const read = await (await client('2025-11-25')).readResource('agentroom://posts');
    expect(read).not.toHaveProperty('ttlMs');
    expect(read).not.toHaveProperty('cacheScope');
  });
});
