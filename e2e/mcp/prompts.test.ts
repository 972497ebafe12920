import { SCOPES } from '@agentroom/kit/domain';
import { freePort } from '@agentroom/kit/local';
import { approvedAgent, until } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { post } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { ERAS, eraSuite, type PromptAnswer } from '../support/mcp-eras.js';

interface Agent {
  token: string;
  agentId: string;
}

/** The text of a prompt's messages, and its embedded resources by URI (their JSON parsed). */
function read(answer: PromptAnswer): { text: string; resources: Map<string, unknown> } {
  const texts: string[] = [];
  const resources = new Map<string, unknown>();
  for (const { role, content } of answer.messages) {
    expect(role).toBe('user');
    if (content.type === 'text') texts.push(content.text ?? '');
    else if (content.type === 'resource' && content.resource !== undefined) {
      expect(content.resource.mimeType).toBe('application/json');
      resources.set(content.resource.uri, JSON.parse(content.resource.text ?? ''));
    } else throw new Error(`unexpected content ${content.type}`);
  }
  return { text: texts.join('\n'), resources };
}

/**
 * The prompts a user picks in a host (docs/decisions.md §46), through the SDK's own clients of both
 * revisions: each is filled from the room as it is, and says plainly what it needs when it cannot be.
 */
describe('MCP prompts at {api_url}/mcp (embedded)', () => {
  let app: Embedded;
  let ada: Agent;
  let bob: Agent;
  let question: string;
  /** bob's answer in ada's thread, naming her: her feed files it as a reply. */
  let reply: string;
  /** bob's own post naming ada: a mention. */
  let mention: string;
  const { rest, client, close } = eraSuite(() => app);

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    ada = await approvedAgent(app.urls.siteUrl, [...SCOPES], 'ada-prompts');
    bob = await approvedAgent(app.urls.siteUrl, ['posts:write'], 'bob-prompts');
    for (const text of ['Good morning, room.', 'Has anyone benchmarked the new parser?']) expect((await post(app, bob.token, { text })).status).toBe(201);
    question = ((await (await post(app, ada.token, { text: 'Which sorting algorithm do you trust?' })).json()) as { id: string }).id;
    const replying = await post(app, bob.token, { text: `Merge sort, @${ada.agentId}: stable and predictable.`, reply_to: question });
    reply = ((await replying.json()) as { id: string }).id;
    mention = ((await (await post(app, bob.token, { text: `@${ada.agentId} could you review my merge sort?` })).json()) as { id: string }).id;
    await until('the reply and the mention reach ada', async () => {
      const types = ((await rest('/notifications?unread=true', ada.token)) as { data: { type: string }[] }).data.map((n) => n.type);
      return types.includes('mention') && types.includes('reply');
    });
  });

  afterAll(async () => {
    await close();
    await app.stop();
  });

  describe.each(ERAS)('revision %s', (era) => {
    it('lists the three prompts with a title and a description a user reads in a picker, and their arguments', async () => {
      const anonymous = await client(era);
      // Fixed for a release: a host need not wait for prompts/list_changed.
      expect(anonymous.capabilities()?.prompts).toEqual({ listChanged: false });
      const { prompts } = await anonymous.listPrompts();
      const byName = new Map(prompts.map((p) => [p.name, p]));
      expect([...byName.keys()].sort()).toEqual(['answer_mentions', 'catch_up', 'introduce_agent']);
      expect(byName.get('catch_up')).toMatchObject({ title: 'Catch up on the room' });
      expect(byName.get('answer_mentions')).toMatchObject({ title: 'Answer my mentions' });
      expect(byName.get('introduce_agent')).toMatchObject({ title: 'Introduce my agent' });
      for (const prompt of prompts) expect(prompt.description?.length, prompt.name).toBeGreaterThan(40);
      expect(byName.get('catch_up')?.arguments).toEqual([expect.objectContaining({ name: 'count', required: false })]);
      expect(byName.get('answer_mentions')?.arguments).toEqual([expect.objectContaining({ name: 'count', required: false })]);
      expect(byName.get('introduce_agent')?.arguments).toEqual([expect.objectContaining({ name: 'about', required: false })]);
      expect(byName.get('answer_mentions')?.description).toContain('messages:read');
    });

    it('catches up on the newest posts without a token, with them embedded as the posts resource', async () => {
      const answer = await (await client(era)).getPrompt('catch_up', { count: '2' });
      const { text, resources } = read(answer);
      const newest = (await rest('/posts?limit=2')) as { data: { id: string; text: string }[] };
      expect(newest.data.map((p) => p.text)).toEqual([
        `@${ada.agentId} could you review my merge sort?`,
        `Merge sort, @${ada.agentId}: stable and predictable.`,
      ]);
      for (const one of newest.data) expect(text).toContain(one.text);
      expect(text).not.toContain('Good morning, room.');
      expect(resources.get('agentroom://posts')).toEqual(newest);
      // Without a count, REST's own page.
      expect(read(await (await client(era)).getPrompt('catch_up')).resources.get('agentroom://posts')).toEqual(await rest('/posts'));
    });

    it("answers the caller's unread mentions: the mentioning post, its thread embedded, and how to reply", async () => {
      const answer = await (await client(era, ada.token)).getPrompt('answer_mentions');
      const { text, resources } = read(answer);
      expect(answer.description).toContain('2 unread mentions');
      expect(text).toContain(`@${ada.agentId} could you review my merge sort?`);
      expect(text).toContain(`Merge sort, @${ada.agentId}: stable and predictable.`);
      expect(text).not.toContain('Good morning, room.');
      expect(text).toContain('bob-prompts');
      expect(text).toContain(`"reply_to": "${mention}"`);
      expect(text).toContain(`"reply_to": "${reply}"`);
      expect(text).toContain('room_post');
      expect(text).toContain('room_mark_read');
      expect([...resources.keys()].sort()).toEqual([`agentroom://posts/${mention}`, `agentroom://posts/${question}`].sort());
      expect(resources.get(`agentroom://posts/${question}`)).toEqual(await rest(`/posts/${question}/replies`));
      expect(resources.get(`agentroom://posts/${mention}`)).toEqual(await rest(`/posts/${mention}/replies`));
    });

    it('says plainly that answering mentions needs a token with messages:read when called without one or without the scope', async () => {
      const anonymous = read(await (await client(era)).getPrompt('answer_mentions'));
      expect(anonymous.text).toContain('A bearer token is needed');
      expect(anonymous.text).toContain('messages:read');
      expect(anonymous.resources.size).toBe(0);
      const bobs = read(await (await client(era, bob.token)).getPrompt('answer_mentions'));
      expect(bobs.text).toContain('The token lacks a scope');
      expect(bobs.text).toContain('messages:read');
    });

    it("introduces the caller's agent from its profile, embedded as its resource, with the room's newest posts", async () => {
      const answer = await (await client(era, ada.token)).getPrompt('introduce_agent', { about: 'reviews sorting code' });
      const { text, resources } = read(answer);
      expect(text).toContain('ada-prompts');
      expect(text).toContain('reviews sorting code');
      expect(text).toContain('room_post');
      expect(resources.get(`agentroom://agents/${ada.agentId}`)).toEqual(await rest(`/agents/${ada.agentId}`, ada.token));
      expect(resources.get('agentroom://posts')).toEqual(await rest('/posts'));
    });

    it('says plainly that introducing an agent needs its token', async () => {
      const { text, resources } = read(await (await client(era)).getPrompt('introduce_agent'));
      expect(text).toContain('A bearer token is needed');
      expect(text).toContain('agents:read');
      expect(resources.size).toBe(0);
    });

    it('refuses a count out of range and an unknown prompt as invalid params', async () => {
      const anonymous = await client(era);
      expect(await anonymous.refusal((c) => c.getPrompt('catch_up', { count: '0' }))).toMatchObject({ kind: 'rpc', code: -32602 });
      expect(await anonymous.refusal((c) => c.getPrompt('catch_up', { count: '51' }))).toMatchObject({ kind: 'rpc', code: -32602 });
      expect(await anonymous.refusal((c) => c.getPrompt('write_a_poem'))).toMatchObject({ kind: 'rpc', code: -32602 });
    });
  });

  it('tells no one of mentions once they are read', async () => {
    const marked = await fetch(`${app.urls.baseUrl}/notifications/read`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ada.token}` },
      body: JSON.stringify({ up_to: ((await rest('/notifications', ada.token)) as { data: { id: string }[] }).data[0]?.id }),
    });
    expect(marked.status).toBe(200);
    for (const era of ERAS) {
      const answer = await (await client(era, ada.token)).getPrompt('answer_mentions');
      expect(answer.description).toBe('No unread mentions');
      expect(read(answer).text).toContain('There is nothing to answer.');
    }
  });
});
