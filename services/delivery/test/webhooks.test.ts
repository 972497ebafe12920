import { randomUUID } from 'node:crypto';
import { notification as apiNotificationSchema } from '@agentroom/api';
import { loadConfig } from '@agentroom/kit/config';
import { unaryCall, CLIENT_OPTIONS } from '@agentroom/kit/grpc';
import { DomainError } from '@agentroom/kit/problems';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import { messagingProto, type RoomServiceClient, type SendMessageResponse__Output } from '@agentroom/proto';
import * as grpc from '@grpc/grpc-js';
import { Webhook as Signer, WebhookVerificationError } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { deliveryEnv, type RunningDelivery, start, USER_AGENT } from '../src/index.js';
import {
  agent,
  DEADLINE,
  deliveryCalls,
  percentile,
  post,
  type Received,
  type Receiver,
  roomClient,
  startReceiver,
  untilNotifying,
  webhookHeaders,
} from './support.js';

const env = { SITE_URL: 'http://room.test', LOG_LEVEL: 'silent', SHUTDOWN_GRACE_MS: '1000' } as const;
const FAST = { leaseMs: 1_000, renewMs: 250, retryMs: 50, maxRetryMs: 250 };
const POLL = { timeout: 5_000, interval: 10 } as const;

let room: ServiceProcess;
let roomGrpc: RoomServiceClient;
/** The messaging service, its own process as in a deployment. */
let messaging: ServiceProcess;
let messagingPort: number;
let delivery: RunningDelivery;
let calls: ReturnType<typeof deliveryCalls>;
let receiver: Receiver;

beforeAll(async () => {
  room = await startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env });
  roomGrpc = roomClient(room.address);
  messaging = await startServiceProcess({ service: 'messaging', addressVariable: 'MESSAGING_GRPC_ADDR', env: { ...env, ROOM_ADDR: room.address } });
  messagingPort = Number(messaging.address.split(':').at(-1));
  await untilNotifying(roomGrpc, messaging.address);
  delivery = await start(
    loadConfig(deliveryEnv, {
      ...env,
      DELIVERY_GRPC_ADDR: '127.0.0.1:0',
      MESSAGING_ADDR: `127.0.0.1:${messagingPort}`,
      ROOM_ADDR: room.address,
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    }),
    undefined,
    // Retries within 50 ms (full jitter under a cap of 100), so a 500 then 200 fits in a test.
    { dispatcher: FAST, worker: { retryDelaysMs: [100, 100, 100], promoteEveryMs: 20 } },
  );
  calls = deliveryCalls(delivery.port);
  receiver = await startReceiver();
  const deadline = Date.now() + 5_000;
  while (!delivery.dispatcher.isFollowing) {
    if (Date.now() > deadline) throw new Error('the dispatcher did not follow in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
});

afterAll(async () => {
  calls.client.close();
  await delivery.stop();
  await messaging.stop();
  roomGrpc.close();
  await room.stop();
  await receiver.close();
});

async function rejection(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DomainError);
  return error as DomainError;
}

let paths = 0;
/** A fresh path of the receiver, so each test reads only its own deliveries. */
function endpoint(): { url: string; path: string; got: () => Received[] } {
  paths += 1;
  const path = `/hook/${paths}`;
  return { url: `${receiver.url}${path}`, path, got: () => receiver.received.filter((request) => request.path === path) };
}

/** Verifies a delivery as a user's server would; answers its parsed body. */
function verified(secret: string, request: Received): { type: string; timestamp: string; data: Record<string, unknown> } {
  return new Signer(secret).verify(request.body, webhookHeaders(request)) as { type: string; timestamp: string; data: Record<string, unknown> };
}

const body = z
  .object({ type: z.enum(['mention', 'reply', 'direct_message', 'test']), timestamp: z.iso.datetime(), data: z.record(z.string(), z.unknown()) })
  .strict();

describe('webhooks, end to end (room, messaging and delivery, a receiver on 127.0.0.1)', () => {
  it('delivers a mention posted in the room, signed, within a second, with the notification as REST lists it', async () => {
    const [alice, bob] = [await agent(roomGrpc, 'alice'), await agent(roomGrpc, 'bob')];
    const hook = endpoint();
    const created = await calls.create(bob, hook.url, ['mention']);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(created.webhook).toMatchObject({
      agentId: bob,
      url: hook.url,
      events: ['mention'],
      enabled: true,
      disabledReason: '',
      failuresInARow: 0,
      recentAttempts: [],
    });
    const posted = Date.now();
    const postId = await post(roomGrpc, alice, `hello @${bob}, "quoted" 😀`);
    await expect.poll(() => hook.got().length, { timeout: 1_000, interval: 5 }).toBe(1);
    const [request] = hook.got();
    expect(request!.at - posted).toBeLessThan(1_000);
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['user-agent']).toBe(USER_AGENT);
    expect(request!.headers['webhook-id']).toMatch(new RegExp(`^msg_\\d+-\\d+_${created.webhook!.id}$`));
    const delivered = body.parse(verified(created.secret, request!));
    expect(delivered.type).toBe('mention');
    // Exactly the API's notification: no field it does not have, mentions as {id, agentName}, empty ones left out.
    const data = apiNotificationSchema.strict().parse(delivered.data);
    expect(data).toMatchObject({
      type: 'mention',
      read: false,
      post: { id: postId, agentId: alice, text: `hello @${bob}, "quoted" 😀`, via: 'mcp', mentions: [{ id: bob, agentName: expect.any(String) }] },
    });
    expect(apiNotificationSchema.shape.post.unwrap().strict().parse(data.post)).not.toHaveProperty('replyTo');
    expect(delivered.timestamp).toBe(data.createdAt);
    // The wrong secret does not verify it.
    expect(() => new Signer(`whsec_${Buffer.alloc(24, 1).toString('base64')}`).verify(request!.body, webhookHeaders(request!))).toThrow(
      WebhookVerificationError,
    );
    await expect
      .poll(async () => (await calls.list(bob)).webhooks[0]?.recentAttempts.map((a) => [a.status, a.attempt, a.eventType, a.error]), POLL)
      .toEqual([[200, 1, 'mention', '']]);
  });

  it('delivers a direct message and a reply only to the endpoints subscribed to them', async () => {
    const [alice, bob] = [await agent(roomGrpc, 'alice'), await agent(roomGrpc, 'bob')];
    const [dms, replies] = [endpoint(), endpoint()];
    const dmHook = await calls.create(bob, dms.url, ['direct_message']);
    const replyHook = await calls.create(bob, replies.url, ['reply']);
    const client = new (messagingProto().MessagingService)(`127.0.0.1:${messagingPort}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
    const sent = await unaryCall<SendMessageResponse__Output>(DEADLINE, (metadata, options, callback) =>
      client.sendMessage({ fromAgentId: alice, toAgentId: bob, text: 'psst', via: 'VIA_REST', callKey: randomUUID() }, metadata, options, callback),
    );
    client.close();
    const original = await post(roomGrpc, bob, 'a post of bob');
    await post(roomGrpc, alice, 'an answer', original);
    await expect.poll(() => [dms.got().length, replies.got().length], POLL).toEqual([1, 1]);
    const dm = verified(dmHook.secret, dms.got()[0]!);
    expect(dm.type).toBe('direct_message');
    expect(apiNotificationSchema.strict().parse(dm.data)).toMatchObject({
      type: 'direct_message',
      message: { id: sent.message?.id, fromAgentId: alice, toAgentId: bob, text: 'psst', via: 'rest' },
    });
    const reply = verified(replyHook.secret, replies.got()[0]!);
    expect(apiNotificationSchema.strict().parse(reply.data)).toMatchObject({
      type: 'reply',
      post: { text: 'an answer', replyTo: original, threadId: original },
    });
    // Nothing else arrives (a mention-less post notifies nobody, and each endpoint took only its type).
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect([dms.got().length, replies.got().length]).toEqual([1, 1]);
  });

  it('retries a delivery answered 500: the same webhook-id again, and a 2xx ends it', async () => {
    const [alice, bob] = [await agent(roomGrpc, 'alice'), await agent(roomGrpc, 'bob')];
    const hook = endpoint();
    receiver.answer(hook.path, 500);
    const created = await calls.create(bob, hook.url);
    await post(roomGrpc, alice, `@${bob} again?`);
    await expect.poll(() => hook.got().length, POLL).toBe(2);
    const [first, second] = hook.got();
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(verified(created.secret, second!)).toEqual(verified(created.secret, first!));
    await expect
      .poll(async () => (await calls.list(bob)).webhooks[0]?.recentAttempts.map((a) => [a.status, a.attempt, a.error]), POLL)
      .toEqual([
        [200, 2, ''],
        [500, 1, 'the endpoint answered 500'],
      ]);
    expect((await calls.list(bob)).webhooks[0]).toMatchObject({ enabled: true, failuresInARow: 0 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(hook.got()).toHaveLength(2);
  });

  it("sends a removed post's tombstone in every attempt after the removal: same webhook-id, no text", async () => {
    const [alice, bob] = [await agent(roomGrpc, 'alice'), await agent(roomGrpc, 'bob')];
    const hook = endpoint();
    receiver.answer(hook.path, 500);
    const created = await calls.create(bob, hook.url, ['mention']);
    const postId = await post(roomGrpc, alice, `@${bob} words a moderator removes`);
    // The first attempt is answered 500 only once the post was removed: the retry comes after it.
    receiver.onRequest = async (request) => {
      if (request.path !== hook.path) return;
      receiver.onRequest = undefined;
      await unaryCall(DEADLINE, (metadata, options, callback) => roomGrpc.removePost({ postId, by: 'moderator' }, metadata, options, callback));
    };
    await expect.poll(() => hook.got().length, POLL).toBe(2);
    const [first, second] = hook.got().map((request) => apiNotificationSchema.strict().parse(verified(created.secret, request).data));
    expect(first?.post).toMatchObject({ id: postId, text: `@${bob} words a moderator removes`, mentions: [{ id: bob }] });
    expect(first?.post).not.toHaveProperty('removed');
    expect(second?.post).toMatchObject({ id: postId, agentId: alice, text: '', removed: { by: 'moderator', removedAt: expect.any(String) } });
    expect(second?.post).not.toHaveProperty('mentions');
    expect(hook.got()[1]!.body).not.toContain('words a moderator removes');
    expect(hook.got()[1]!.headers['webhook-id']).toBe(hook.got()[0]!.headers['webhook-id']);
  });

  it('disables an endpoint that answers 410 Gone; nothing more reaches it until it is enabled again', async () => {
    const [alice, bob] = [await agent(roomGrpc, 'alice'), await agent(roomGrpc, 'bob')];
    const hook = endpoint();
    receiver.answer(hook.path, 410);
    const created = await calls.create(bob, hook.url);
    await post(roomGrpc, alice, `@${bob} one`);
    await expect.poll(async () => (await calls.list(bob)).webhooks[0]?.enabled, POLL).toBe(false);
    expect((await calls.list(bob)).webhooks[0]).toMatchObject({ disabledReason: 'the endpoint answered 410 Gone', failuresInARow: 1 });
    await post(roomGrpc, alice, `@${bob} two`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(hook.got()).toHaveLength(1);
    const enabled = await calls.enable(bob, created.webhook!.id);
    expect(enabled.webhook).toMatchObject({ enabled: true, disabledReason: '', failuresInARow: 0 });
    await post(roomGrpc, alice, `@${bob} three`);
    await expect.poll(() => hook.got().length, POLL).toBe(2);
    expect((verified(created.secret, hook.got()[1]!).data.post as { text: string }).text).toBe(`@${bob} three`);
  });

  it('signs with the new secret from the rotation on: later deliveries verify with it, not with the old one', async () => {
    const [alice, bob] = [await agent(roomGrpc, 'alice'), await agent(roomGrpc, 'bob')];
    const hook = endpoint();
    const created = await calls.create(bob, hook.url);
    await post(roomGrpc, alice, `@${bob} before`);
    await expect.poll(() => hook.got().length, POLL).toBe(1);
    const rotated = await calls.rotate(bob, created.webhook!.id);
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(created.secret);
    expect(rotated.webhook?.id).toBe(created.webhook?.id);
    await post(roomGrpc, alice, `@${bob} after`);
    await expect.poll(() => hook.got().length, POLL).toBe(2);
    const later = hook.got()[1]!;
    expect((verified(rotated.secret, later).data.post as { text: string }).text).toBe(`@${bob} after`);
    expect(() => verified(created.secret, later)).toThrow(WebhookVerificationError);
  });

  it('sends a test event at once, with its message id', async () => {
    const bob = await agent(roomGrpc, 'bob');
    const hook = endpoint();
    const created = await calls.create(bob, hook.url, ['reply']);
    const { messageId } = await calls.test(bob, created.webhook!.id);
    await expect.poll(() => hook.got().length, POLL).toBe(1);
    expect(hook.got()[0]!.headers['webhook-id']).toBe(messageId);
    const delivered = body.parse(verified(created.secret, hook.got()[0]!));
    expect(delivered).toEqual({
      type: 'test',
      timestamp: delivered.timestamp,
      data: { webhook_id: created.webhook!.id, message: 'a test event from Agent Room' },
    });
  });

  it('keeps each agent to its own endpoints, at most 5, with valid event types; never shows a secret in a list', async () => {
    const [bob, carol] = [await agent(roomGrpc, 'bob'), await agent(roomGrpc, 'carol')];
    const made = [];
    for (let i = 0; i < 5; i += 1) made.push(await calls.create(bob, endpoint().url, ['mention']));
    expect((await rejection(calls.create(bob, endpoint().url))).slug).toBe('too-many-webhooks');
    const listed = await calls.list(bob);
    expect(listed.webhooks.map((webhook) => webhook.id)).toEqual(made.map((m) => m.webhook!.id));
    expect(JSON.stringify(listed)).not.toContain(made[0]!.secret.slice(6));
    for (const events of [[], ['mention', 'likes'], ['MENTION']]) {
      const error = await rejection(calls.create(carol, endpoint().url, events));
      expect([error.slug, error.fields.parameter]).toEqual(['invalid-request', 'events']);
    }
    const id = made[0]!.webhook!.id;
    for (const call of [calls.enable(carol, id), calls.rotate(carol, id), calls.test(carol, id), calls.remove(carol, id), calls.enable(bob, 'wh_nope')]) {
      expect((await rejection(call)).slug).toBe('webhook-not-found');
    }
    await calls.remove(bob, id);
    expect((await rejection(calls.remove(bob, id))).slug).toBe('webhook-not-found');
    expect((await calls.list(bob)).webhooks).toHaveLength(4);
    expect((await rejection(calls.list('not an id!'))).slug).toBe('invalid-request');
  });

  it('measures the latency from a post to its verified receipt', async () => {
    const [alice, bob] = [await agent(roomGrpc, 'alice'), await agent(roomGrpc, 'bob')];
    const hook = endpoint();
    const created = await calls.create(bob, hook.url, ['mention']);
    const latencies: number[] = [];
    for (let i = 0; i < 50; i += 1) {
      const started = performance.now();
      const arrived = new Promise<void>((resolve) => {
        receiver.onRequest = (request) => {
          if (request.path !== hook.path) return;
          verified(created.secret, request);
          resolve();
        };
      });
      await post(roomGrpc, alice, `@${bob} n${i}`);
      await arrived;
      latencies.push(performance.now() - started);
    }
    receiver.onRequest = undefined;
    const [p50, p99] = [percentile(latencies, 50), percentile(latencies, 99)];
    console.log(`webhook latency, post to verified receipt (memory storage, 50 posts): p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms`);
    expect(p99).toBeLessThan(1_000);
  });
});

describe('webhook targets without WEBHOOKS_ALLOW_PRIVATE_TARGETS', () => {
  it('refuses http:, loopback, private, link-local and metadata addresses, and names resolving to them, before any request', async () => {
    const looked: string[] = [];
    const guarded = await start(
      loadConfig(deliveryEnv, { ...env, DELIVERY_GRPC_ADDR: '127.0.0.1:0', MESSAGING_ADDR: `127.0.0.1:${messagingPort}` }),
      undefined,
      {
        dispatcher: FAST,
        lookup: (hostname) => {
          looked.push(hostname);
          if (hostname === 'public.example') return Promise.resolve([{ address: '93.184.216.34', family: 4 }]);
          if (hostname === 'inside.example') return Promise.resolve([{ address: '10.1.2.3', family: 4 }]);
          if (hostname === 'sneaky.example')
            return Promise.resolve([
              { address: '93.184.216.34', family: 4 },
              { address: '127.0.0.1', family: 4 },
            ]);
          return Promise.reject(new Error('ENOTFOUND'));
        },
      },
    );
    const guardedCalls = deliveryCalls(guarded.port);
    try {
      const bob = await agent(roomGrpc, 'bob');
      const port = new URL(receiver.url).port;
      const before = { requests: receiver.received.length, connections: receiver.connections };
      const refusals: Record<string, string> = {};
      for (const url of [
        `http://127.0.0.1:${port}/hook`,
        `https://127.0.0.1:${port}/hook`,
        'https://10.0.0.1/hook',
        'https://169.254.169.254/latest/meta-data',
        `https://[::1]:${port}/hook`,
        'https://inside.example/hook',
        'https://sneaky.example/hook',
        'https://nowhere.example/hook',
        'not a url',
      ]) {
        const error = await rejection(guardedCalls.create(bob, url));
        expect([url, error.slug, error.fields.parameter]).toEqual([url, 'webhook-target-refused', 'url']);
        refusals[url] = error.message;
      }
      expect(refusals[`http://127.0.0.1:${port}/hook`]).toContain('not https');
      expect(refusals['https://169.254.169.254/latest/meta-data']).toContain('metadata address');
      expect(refusals['https://inside.example/hook']).toContain('private');
      expect(refusals['https://nowhere.example/hook']).toContain('does not resolve');
      expect(looked).toEqual(['inside.example', 'sneaky.example', 'nowhere.example']);
      // Nothing reached the receiver: the guard refused before connecting.
      expect({ requests: receiver.received.length, connections: receiver.connections }).toEqual(before);
      expect((await guardedCalls.list(bob)).webhooks).toEqual([]);
      // A name resolving to public addresses only is accepted (checked, not called).
      const accepted = await guardedCalls.create(bob, 'https://public.example/hook');
      expect(accepted.webhook?.url).toBe('https://public.example/hook');
      expect(looked.at(-1)).toBe('public.example');
    } finally {
      guardedCalls.client.close();
      await guarded.stop();
    }
  });
});
