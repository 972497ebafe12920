import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { type Problem, signUp } from '../support/agent.js';
import { SseClient } from '../support/sse.js';

interface MessageBody {
  id: string;
  fromAgentId: string;
  toAgentId: string;
  text: string;
}

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
const alan = { name: 'Alan Turing', password: 'the imitation game' };

describe('the inbox stream (embedded)', () => {
  let app: Embedded;
  let reader: string;
  let readerId: string;
  let writer: string;
  let bystander: string;
  let bystanderId: string;
  let stream: string;

  async function send(token: string, to: string, text: string): Promise<MessageBody> {
    const response = await fetch(`${app.urls.baseUrl}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ to, text }),
    });
    if (response.status !== 201) throw new Error(`sendMessage answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as MessageBody;
  }

  beforeAll(async () => {
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      LIVE_HEARTBEAT_MS: '100',
    });
    stream = `${app.urls.baseUrl}/messages/stream`;
    reader = (await signUp(app, ['messages:read', 'messages:write'], 'reader', ada)).token;
    writer = (await signUp(app, ['messages:write'], 'writer', alan)).token;
    bystander = (await signUp(app, ['messages:read', 'messages:write'], 'bystander', alan)).token;
    // The room's open agent list names the reader's id, as any agent would look it up.
    const agents = (await (await fetch(`${app.urls.baseUrl}/agents`)).json()) as { data: { id: string; agentName: string }[] };
    readerId = agents.data.find((a) => a.agentName === 'reader')?.id ?? '';
    bystanderId = agents.data.find((a) => a.agentName === 'bystander')?.id ?? '';
    expect(readerId).not.toBe('');
    expect(bystanderId).not.toBe('');
  });

  afterAll(() => app.stop());

  it('refuses a stream without a token (401) or without messages:read (403), as problems, not empty streams', async () => {
    const anonymous = await SseClient.open(stream);
    expect(anonymous).toBeInstanceOf(Response);
    expect((anonymous as Response).status).toBe(401);
    const writeOnly = (await SseClient.open(stream, { authorization: `Bearer ${writer}` })) as Response;
    expect(writeOnly.status).toBe(403);
    expect(writeOnly.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect((await writeOnly.json()) as Problem).toMatchObject({ code: 'scope_required', required_scope: 'messages:read', held_scopes: ['messages:write'] });
  });

  it('delivers a message sent after subscribing, and only to its recipient', async () => {
    const mine = await SseClient.connect(stream, { authorization: `Bearer ${reader}` });
    const theirs = await SseClient.connect(stream, { authorization: `Bearer ${bystander}` });
    const sent = await send(writer, readerId, 'for the reader only');
    const [event] = await mine.waitForEvents(1, 1_000);
    expect(event).toMatchObject({ id: sent.id, event: 'message' });
    expect(JSON.parse(event?.data ?? '{}')).toEqual(sent);
    // A stream is in order: had the reader's message gone to the bystander, it would come before this one.
    const theirsOnly = await send(writer, bystanderId, 'for the bystander');
    const [first] = await theirs.waitForEvents(1);
    mine.close();
    theirs.close();
    expect(first?.id).toBe(theirsOnly.id);
    expect(sent.toAgentId).toBe(readerId);
  });

  it('resumes after Last-Event-ID with exactly the messages sent while disconnected, in order', async () => {
    const first = await SseClient.connect(stream, { authorization: `Bearer ${reader}` });
    const seen = await send(writer, readerId, 'before the drop');
    await first.waitForEvents(1);
    first.close();
    const missed = [await send(writer, readerId, 'one'), await send(writer, readerId, 'two'), await send(writer, readerId, 'three')];
    const again = await SseClient.connect(stream, { authorization: `Bearer ${reader}`, 'last-event-id': seen.id });
    // A live message after the missed ones: any one repeated would come before it.
    const live = await send(writer, readerId, 'live');
    const events = await again.waitForEvents(4);
    again.close();
    expect(events.map((e) => e.id)).toEqual([...missed, live].map((m) => m.id));
  });

  it('answers a Last-Event-ID that is not ours with a 400 problem', async () => {
    const response = (await SseClient.open(stream, { authorization: `Bearer ${reader}`, 'last-event-id': 'not-an-id' })) as Response;
    expect(response.status).toBe(400);
    expect(((await response.json()) as Problem).type).toBe(`${app.urls.siteUrl}/problems/invalid-event-id`);
  });

  it('ends the stream of a token revoked while it is open', async () => {
    const { token } = await signUp(app, ['messages:read'], 'short-lived', ada);
    const client = await SseClient.connect(stream, { authorization: `Bearer ${token}` });
    const revoked = await fetch(`${app.urls.apiUrl}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token }),
    });
    expect(revoked.status).toBe(200);
    // Within a few heartbeats (100 ms here) the server says why and closes the stream.
    await Promise.race([client.ended, new Promise((_, reject) => setTimeout(() => reject(new Error('the stream outlived its token')), 3_000))]);
    expect(client.events.at(-1)).toMatchObject({ event: 'end' });
    expect(JSON.parse(client.events.at(-1)?.data ?? '{}')).toMatchObject({ reason: 'token_revoked' });
    const again = (await SseClient.open(stream, { authorization: `Bearer ${token}` })) as Response;
    expect(again.status).toBe(401);
  });
});
