import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { type Problem, signUp } from '../support/agent.js';

interface MessageBody {
  id: string;
  fromAgentId: string;
  fromAgentName: string;
  toAgentId: string;
  toAgentName: string;
  text: string;
  via: string;
  createdAt: string;
}

interface MessageListBody {
  object: 'list';
  data: MessageBody[];
  has_more: boolean;
  next_cursor: string | null;
}

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
const alan = { name: 'Alan Turing', password: 'the imitation game' };

async function problemOf(response: Response, status: number, code: string): Promise<Problem> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(response.headers.get('ratelimit-limit')).not.toBeNull();
  const text = await response.text();
  // Nothing internal leaks: no stack frames, no Redis keys.
  expect(text).not.toMatch(/at \w+ \(|node_modules|\.ts:\d|:messaging:|:inbox/);
  const body = JSON.parse(text) as Problem;
  expect(body).toMatchObject({ status, code });
  return body;
}

describe.each([['memory'], ['redis']])('direct messages over REST (embedded, %s)', (storage) => {
  let app: Embedded;
  let redis: LocalRedis | undefined;
  /** Alice (approved by Ada) and Bob (approved by Alan) can both read and write messages. */
  let alice: string;
  let bob: string;
  let aliceId: string;
  let bobId: string;

  function send(token: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(`${app.urls.baseUrl}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  }

  function list(token: string | undefined, query = ''): Promise<Response> {
    return fetch(`${app.urls.baseUrl}/messages${query}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  }

  async function inbox(token: string, query = ''): Promise<MessageListBody> {
    const response = await list(token, query);
    expect(response.status).toBe(200);
    return (await response.json()) as MessageListBody;
  }

  /** An agent's id, looked up the way any agent would: in the room's open list. */
  async function idOf(agentName: string): Promise<string> {
    const agents = (await (await fetch(`${app.urls.baseUrl}/agents?limit=50`)).json()) as { data: { id: string; agentName: string }[] };
    const id = agents.data.find((a) => a.agentName === agentName)?.id;
    if (id === undefined) throw new Error(`no agent named ${agentName}`);
    return id;
  }

  beforeAll(async () => {
    redis = storage === 'redis' ? await startRedisServer() : undefined;
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      ...(redis ? { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'dm' } : {}),
    });
    expect(app.storage).toBe(storage);
    alice = (await signUp(app, ['messages:read', 'messages:write'], 'alice', ada)).token;
    bob = (await signUp(app, ['messages:read', 'messages:write'], 'bob', alan)).token;
    aliceId = await idOf('alice');
    bobId = await idOf('bob');
  });

  afterAll(async () => {
    await app.stop();
    await redis?.stop();
  });

  it("lets two agents of two humans exchange messages: each lands in its recipient's inbox with both names", async () => {
    const sent = await send(alice, { to: bobId, text: 'hello bob, shall we review the room?' });
    expect(sent.status).toBe(201);
    const question = (await sent.json()) as MessageBody;
    expect(question).toEqual({
      id: expect.stringMatching(/^\d+-\d+$/) as unknown as string,
      fromAgentId: aliceId,
      fromAgentName: 'alice',
      toAgentId: bobId,
      toAgentName: 'bob',
      text: 'hello bob, shall we review the room?',
      via: 'rest',
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown as string,
    });
    expect((await inbox(bob, '?limit=1')).data).toEqual([question]);

    const reply = (await (await send(bob, { to: aliceId, text: 'yes, after lunch' })).json()) as MessageBody;
    expect(reply).toMatchObject({ fromAgentId: bobId, fromAgentName: 'bob', toAgentId: aliceId, toAgentName: 'alice', via: 'rest' });
    const aliceInbox = await inbox(alice);
    expect(aliceInbox.data.map((m) => m.text)).toContain('yes, after lunch');
    expect(aliceInbox.data.map((m) => m.text)).not.toContain('hello bob, shall we review the room?');
  });

  it('takes the sender from the token only, whatever the body claims', async () => {
    const response = await send(alice, { to: bobId, text: 'who am I?', from: bobId, fromAgentId: bobId, fromAgentName: 'impostor' });
    expect(response.status).toBe(201);
    expect((await response.json()) as MessageBody).toMatchObject({ fromAgentId: aliceId, fromAgentName: 'alice' });
  });

  it('lets an agent send a message to itself; it lands in its own inbox', async () => {
    const response = await send(alice, { to: aliceId, text: 'note to self: water the plants' });
    expect(response.status).toBe(201);
    const note = (await response.json()) as MessageBody;
    expect(note).toMatchObject({ fromAgentId: aliceId, toAgentId: aliceId, fromAgentName: 'alice', toAgentName: 'alice' });
    expect((await inbox(alice, '?limit=1')).data).toEqual([note]);
  });

  it('lists the inbox newest first in pages whose cursor survives new messages', async () => {
    const { token: reader } = await signUp(app, ['messages:read'], 'pager', ada);
    const readerId = await idOf('pager');
    for (let i = 1; i <= 5; i += 1) expect((await send(alice, { to: readerId, text: `page ${i}` })).status).toBe(201);
    const first = await inbox(reader, '?limit=2');
    expect(first).toMatchObject({ object: 'list', has_more: true });
    expect(first.data.map((m) => m.text)).toEqual(['page 5', 'page 4']);
    expect(first.next_cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    await send(bob, { to: readerId, text: 'page 6' });
    const second = await inbox(reader, `?limit=2&cursor=${first.next_cursor ?? ''}`);
    expect(second.data.map((m) => m.text)).toEqual(['page 3', 'page 2']);
    const third = await inbox(reader, `?limit=2&cursor=${second.next_cursor ?? ''}`);
    expect(third).toMatchObject({ has_more: false, next_cursor: null });
    expect(third.data.map((m) => m.text)).toEqual(['page 1']);
    expect((await inbox(reader)).data).toHaveLength(6);
    await problemOf(await list(reader, '?limit=0'), 400, 'invalid_request');
    await problemOf(await list(reader, '?limit=51'), 400, 'invalid_request');
    expect((await problemOf(await list(reader, '?cursor=bm90LWEtY3Vyc29y'), 400, 'invalid_request')).type).toMatch(/\/problems\/invalid-cursor$/);
  });

  it('answers no token with 401, and each missing scope with 403 naming it', async () => {
    const { token: writeOnly } = await signUp(app, ['messages:write'], 'writer-only', ada);
    const { token: readOnly } = await signUp(app, ['messages:read'], 'reader-only', alan);
    await problemOf(await list(undefined), 401, 'no_token');
    await problemOf(await send(undefined, { to: bobId, text: 'hi' }), 401, 'no_token');

    const cannotList = await list(writeOnly);
    const listProblem = await problemOf(cannotList, 403, 'scope_required');
    expect(listProblem).toMatchObject({ required_scope: 'messages:read', held_scopes: ['messages:write'] });
    expect(cannotList.headers.get('www-authenticate')).toContain('error="insufficient_scope", scope="messages:read"');
    // A write-only token still sends.
    expect((await send(writeOnly, { to: bobId, text: 'from a write-only token' })).status).toBe(201);

    const cannotSend = await send(readOnly, { to: bobId, text: 'hi' });
    expect(await problemOf(cannotSend, 403, 'scope_required')).toMatchObject({ required_scope: 'messages:write', held_scopes: ['messages:read'] });
    expect((await inbox(bob)).data.map((m) => m.text)).not.toContain('hi');
  });

  it("never shows another agent's inbox, whatever the request names", async () => {
    const secret = (await (await send(alice, { to: bobId, text: "for bob's eyes only" })).json()) as MessageBody;
    const { token: snoop } = await signUp(app, ['messages:read', 'messages:write', 'agents:read'], 'snoop', ada);
    for (const query of [`?agent_id=${bobId}`, `?agentId=${bobId}`, `?agent=${bobId}`, `?to=${bobId}`, `?inbox=${bobId}`, `?limit=5&for=${bobId}`]) {
      const problem = await problemOf(await list(snoop, query), 400, 'invalid_request');
      expect(problem.remedy).toContain('always lists the inbox of the agent whose token is sent');
    }
    for (const path of [`/messages/${bobId}`, `/agents/${bobId}/messages`, `/messages/${secret.id}`]) {
      const response = await fetch(`${app.urls.baseUrl}${path}`, { headers: { authorization: `Bearer ${snoop}` } });
      await problemOf(response, 404, 'not_found');
    }
    // A cursor is bound to the inbox it came from: Bob's, or one made by hand from his message id, is refused.
    const bobsPage = await inbox(bob, '?limit=1');
    expect(bobsPage.data[0]?.id).toBe(secret.id);
    for (const cursor of [bobsPage.next_cursor ?? '', Buffer.from(`v1:${secret.id}`).toString('base64url')]) {
      const refused = await problemOf(await list(snoop, `?cursor=${encodeURIComponent(cursor)}`), 400, 'invalid_request');
      expect(refused).toMatchObject({ parameter: 'cursor', type: `${app.urls.siteUrl}/problems/invalid-cursor` });
    }
    expect(JSON.stringify(await inbox(snoop))).not.toContain('eyes only');
  });

  it('answers a message to an unknown agent with 404 not_found and a remedy naming the agent list', async () => {
    for (const to of ['a_nobody0000000000000', 'not an agent id']) {
      const problem = await problemOf(await send(alice, { to, text: 'anyone?' }), 404, 'not_found');
      expect(problem.type).toBe(`${app.urls.siteUrl}/problems/agent-not-found`);
      expect(problem.remedy).toContain(`GET ${app.urls.baseUrl}/agents`);
    }
  });

  it('takes 2,000 code points, refuses 2,001 with text-too-long, and blank text with text-empty', async () => {
    expect((await send(alice, { to: bobId, text: '🎉'.repeat(2_000) })).status).toBe(201);
    const tooLong = await problemOf(await send(alice, { to: bobId, text: '🎉'.repeat(2_001) }), 400, 'invalid_request');
    expect(tooLong.type).toBe(`${app.urls.siteUrl}/problems/text-too-long`);
    expect(tooLong.remedy).toMatch(/2000/);
    for (const text of ['', '   ']) {
      expect((await problemOf(await send(alice, { to: bobId, text }), 400, 'invalid_request')).type).toMatch(/\/problems\/text-empty$/);
    }
    for (const body of [{ text: 'no recipient' }, { to: bobId }, { to: 42, text: 'x' }, '{"to":']) {
      const response = await send(alice, body);
      expect(response.status).toBe(400);
    }
  });

  it('replays a POST /messages with the same Idempotency-Key instead of sending twice', async () => {
    const { token: counter } = await signUp(app, ['messages:read'], 'counter', alan);
    const counterId = await idOf('counter');
    const key = `dm-${storage}-once`;
    const first = await send(alice, { to: counterId, text: 'exactly once' }, { 'idempotency-key': key });
    expect(first.status).toBe(201);
    const firstBody = await first.text();
    const again = await send(alice, { to: counterId, text: 'exactly once' }, { 'idempotency-key': key });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.text()).toBe(firstBody);
    const other = await send(alice, { to: counterId, text: 'another body' }, { 'idempotency-key': key });
    expect((await problemOf(other, 422, 'invalid_request')).type).toMatch(/idempotency-mismatch$/);
    expect((await inbox(counter)).data.map((m) => m.text)).toEqual(['exactly once']);
  });

  it("shows an agent's profile at GET /agents/{id} to tokens with agents:read only; the list stays open", async () => {
    const { token: looker } = await signUp(app, ['agents:read'], 'looker', ada);
    const profile = await fetch(`${app.urls.baseUrl}/agents/${bobId}`, { headers: { authorization: `Bearer ${looker}` } });
    expect(profile.status).toBe(200);
    expect(await profile.json()).toEqual({
      id: bobId,
      agentName: 'bob',
      humanLabel: 'Alan Turing',
      scopes: ['messages:read', 'messages:write'],
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown as string,
    });
    const unknown = await fetch(`${app.urls.baseUrl}/agents/a_nobody0000000000000`, { headers: { authorization: `Bearer ${looker}` } });
    expect((await problemOf(unknown, 404, 'not_found')).type).toMatch(/\/problems\/agent-not-found$/);

    const withoutScope = await fetch(`${app.urls.baseUrl}/agents/${bobId}`, { headers: { authorization: `Bearer ${alice}` } });
    expect(await problemOf(withoutScope, 403, 'scope_required')).toMatchObject({ required_scope: 'agents:read' });
    await problemOf(await fetch(`${app.urls.baseUrl}/agents/${bobId}`), 401, 'no_token');
    expect((await fetch(`${app.urls.baseUrl}/agents`)).status).toBe(200);
  });
});
