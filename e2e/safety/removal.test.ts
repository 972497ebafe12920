import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { CLIENT_OPTIONS, unaryCall } from '@agentroom/kit/grpc';
import { freePort } from '@agentroom/kit/local';
import { roomProto, type RemovePostResponse__Output, type RoomServiceClient } from '@agentroom/proto';
import type { Browser } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { post, signUp } from '../support/agent.js';
import { launchChromium } from '../support/browser.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { callTool, mcpClient } from '../support/mcp.js';
import { SseClient } from '../support/sse.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };
const WORDS = 'contraband lighthouse coordinates';
const TOMBSTONE = '[removed by a moderator]';
// The first webhook retry comes within 5 s (full jitter): room for it.
const POLL = { timeout: 15_000, interval: 50 } as const;

interface PostBody {
  id: string;
  text: string;
  threadId?: string;
  mentions?: { id: string; agentName: string }[];
  removed?: { by: string; removedAt: string };
  replyCount?: number;
}

interface Delivery {
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A user's webhook server: keeps every delivery. It answers the first 500, and only once `held`
 * resolved (the test removes the post meanwhile): its retry is an attempt made after the removal.
 */
async function receiver(held: Promise<void>): Promise<{ server: Server; url: string; deliveries: Delivery[] }> {
  const deliveries: Delivery[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      deliveries.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      if (deliveries.length === 1) void held.finally(() => res.writeHead(500).end());
      else res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, deliveries };
}

function signatureHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  return {
    'webhook-id': String(headers['webhook-id']),
    'webhook-timestamp': String(headers['webhook-timestamp']),
    'webhook-signature': String(headers['webhook-signature']),
  };
}

describe('a removed post: its text is gone from every read path, its tombstone stays in its place', () => {
  let app: Embedded;
  let room: RoomServiceClient;
  let browser: Browser;
  let author: string;
  let keeper: string;
  let target: Awaited<ReturnType<typeof receiver>> | undefined;
  let release: () => void = () => undefined;

  beforeAll(async () => {
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    });
    room = new (roomProto().RoomService)(`127.0.0.1:${app.roomPort}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
    author = (await signUp(app, ['posts:write'], 'smuggler', ada)).token;
    keeper = (await signUp(app, ['posts:write', 'messages:read'], 'keeper', ada)).token;
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    release();
    await browser?.close();
    room?.close();
    await new Promise((resolve) => (target ? target.server.close(resolve) : resolve(undefined)));
    await app?.stop();
  });

  const get = async <T>(path: string, token?: string): Promise<T> => {
    const response = await fetch(`${app.urls.baseUrl}${path}`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
    expect(response.status, path).toBe(200);
    return (await response.json()) as T;
  };

  const created = async (token: string, body: unknown): Promise<PostBody> => {
    const response = await post(app, token, body);
    expect(response.status).toBe(201);
    return (await response.json()) as PostBody;
  };

  it('REST, the thread, the live feed, search, MCP, the room page, notifications and a later webhook attempt show the tombstone', async () => {
    const held = new Promise<void>((resolve) => (release = resolve));
    target = await receiver(held);
    const hook = await fetch(`${app.urls.baseUrl}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keeper}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: target.url, events: ['mention', 'reply'] }),
    });
    expect(hook.status).toBe(201);
    const { secret } = (await hook.json()) as { secret: string };

    // Edge's hub follows the room from before the posts are made (a first page read, then a stream held open): they are in its resume buffer.
    await get('/posts?limit=1');
    const warm = await SseClient.connect(`${app.urls.baseUrl}/posts/stream`);
    await warm.waitForComments(1);
    warm.close();
    const root = await created(keeper, { text: 'the harbour thread' });
    const removed = await created(author, { text: `${WORDS}, @keeper`, reply_to: root.id });
    const after = await created(keeper, { text: 'a reply that stays', reply_to: root.id });
    // It answers keeper's post and names keeper: keeper is told of it once, as a reply.
    expect(removed.mentions?.map((m) => m.agentName)).toEqual(['keeper']);

    // Before: the words are everywhere they go.
    await expect.poll(() => target?.deliveries.length, POLL).toBe(1);
    expect(target.deliveries[0]?.body).toContain(WORDS);
    await expect.poll(async () => (await get<{ data: unknown[] }>('/posts/search?q=contraband')).data.length, POLL).toBe(1);
    await expect
      .poll(async () => (await get<{ data: { post?: PostBody }[] }>('/notifications', keeper)).data.map((n) => n.post?.text), POLL)
      .toEqual([`${WORDS}, @keeper`]);
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${app.urls.siteUrl}/`);
    await expect.poll(() => page.locator(`#post-${removed.id} > p.text`).textContent(), POLL).toBe(`${WORDS}, @keeper`);
    await page.waitForFunction(() => document.getElementById('live-status')?.classList.contains('live') === true);
    const live = await SseClient.connect(`${app.urls.baseUrl}/posts/stream`);
    await live.waitForComments(1);
    const firstPage = await get<{ data: PostBody[] }>('/posts?limit=10');

    // What an operator does (the moderation pages call the same RPC): RemovePost over the room's gRPC.
    const answered = await unaryCall<RemovePostResponse__Output>(5_000, (metadata, options, callback) =>
      room.removePost({ postId: removed.id, by: 'moderator' }, metadata, options, callback),
    );
    release();
    const removedAt = answered.post?.removal?.removedAt ?? '';
    expect(Date.parse(removedAt)).toBeGreaterThan(0);
    const tombstone = { id: removed.id, text: '', removed: { by: 'moderator', removedAt }, threadId: root.id };

    // The live feed: an event naming the post, without an id (no client's position moves back).
    const [event] = await live.waitForEvents(1);
    live.close();
    expect(event).toMatchObject({ event: 'post_removed', id: undefined });
    expect(JSON.parse(event?.data ?? '{}')).toEqual({ id: removed.id, removed: { by: 'moderator', removedAt } });

    // A client resuming from before it is replayed the tombstone (edge's resume buffer), in its place.
    const resumed = await SseClient.connect(`${app.urls.baseUrl}/posts/stream?last_event_id=${root.id}`);
    const replayed = await resumed.waitForEvents(2);
    resumed.close();
    expect(replayed.map((e) => [e.event, e.id])).toEqual([
      ['post', removed.id],
      ['post', after.id],
    ]);
    expect(JSON.parse(replayed[0]?.data ?? '{}')).toMatchObject(tombstone);

    // REST: the first page (edge's memory), the post, the thread; same places, same counts.
    const listed = await get<{ data: PostBody[] }>('/posts?limit=10');
    expect(listed.data.map((p) => p.id)).toEqual(firstPage.data.map((p) => p.id));
    expect(listed.data.find((p) => p.id === removed.id)).toMatchObject(tombstone);
    expect(listed.data.find((p) => p.id === removed.id)).not.toHaveProperty('mentions');
    expect(listed.data.find((p) => p.id === root.id)?.replyCount).toBe(2);
    expect(await get<PostBody>(`/posts/${removed.id}`)).toMatchObject(tombstone);
    const thread = await get<{ post: PostBody; data: PostBody[] }>(`/posts/${root.id}/replies`);
    expect(thread.data.map((p) => [p.id, p.text])).toEqual([
      [removed.id, ''],
      [after.id, 'a reply that stays'],
    ]);
    expect(JSON.stringify(listed)).not.toContain('contraband');

    // Search: the record erased it.
    await expect.poll(async () => (await get<{ data: unknown[] }>('/posts/search?q=contraband')).data, POLL).toEqual([]);

    // MCP: the structured post is the tombstone, and the line a model reads says why.
    const mcp = await mcpClient(app);
    const read = await callTool(mcp, 'room_read_posts', { limit: 10 });
    await mcp.close();
    const text = read.content.map((part) => part.text ?? '').join('\n');
    expect(text).toContain(`${TOMBSTONE} [post ${removed.id}]`);
    expect(text).not.toContain('contraband');
    expect((read.structuredContent as { data: PostBody[] }).data.find((p) => p.id === removed.id)).toMatchObject(tombstone);

    // The room page: updated live in place, and rendered so after a reload.
    await expect.poll(() => page.locator(`#post-${removed.id} > p.text`).textContent(), POLL).toBe(TOMBSTONE);
    expect(await page.locator(`#post-${removed.id} > p.text`).getAttribute('class')).toBe('text removed');
    await page.reload();
    await expect.poll(() => page.locator(`#post-${removed.id} > p.text.removed`).textContent(), POLL).toBe(TOMBSTONE);
    expect(await page.content()).not.toContain('contraband');
    await page.goto(`${app.urls.siteUrl}/?thread=${root.id}`);
    expect(await page.locator(`#post-${removed.id} > p.text`).textContent()).toBe(TOMBSTONE);

    // The mentioned agent's notifications: the tombstone, in the same place.
    await expect
      .poll(async () => (await get<{ data: { post?: PostBody }[] }>('/notifications', keeper)).data.map((n) => n.post), POLL)
      .toEqual([expect.objectContaining(tombstone)]);

    // The webhook: the attempt made after the removal carries the tombstone, signed, under the same webhook-id.
    await expect.poll(() => target?.deliveries.length, POLL).toBe(2);
    const retry = target.deliveries[1] as Delivery;
    expect(retry.headers['webhook-id']).toBe(target.deliveries[0]?.headers['webhook-id']);
    expect(retry.body).not.toContain('contraband');
    const delivered = new Webhook(secret).verify(retry.body, signatureHeaders(retry.headers)) as { data: { post: PostBody } };
    expect(delivered.data.post).toMatchObject({ ...tombstone, agentName: 'smuggler' });
  });
});
