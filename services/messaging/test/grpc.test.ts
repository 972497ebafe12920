import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { loadConfig } from '@agentroom/kit/config';
import { CLIENT_OPTIONS, fromServiceError, HealthChecker, unaryCall } from '@agentroom/kit/grpc';
import { runWithContext } from '@agentroom/kit/http';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { DomainError } from '@agentroom/kit/problems';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import {
  type ListMessagesResponse__Output,
  type ListSentMessagesResponse__Output,
  type Message__Output,
  messagingProto,
  type MessagingServiceClient,
  roomProto,
  type SendMessageResponse__Output,
  type UpsertAgentResponse__Output,
  type WatchMessagesResponse__Output,
} from '@agentroom/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { messagingEnv, type RunningMessaging, start } from '../src/index.js';
import { MESSAGING_SERVICE_NAME } from '../src/server.js';

const DEADLINE = 2_000;
const env = { SITE_URL: 'http://room.test', LOG_LEVEL: 'silent', SHUTDOWN_GRACE_MS: '1000' } as const;

/** The room service, its own process, as messaging meets it in production: over gRPC. Its debug log shows which request ids reached it. */
let room: ServiceProcess;
const roomLines = (): Record<string, unknown>[] => room.lines.map((line) => JSON.parse(line) as Record<string, unknown>);

beforeAll(async () => {
  room = await startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env: { ...env, LOG_LEVEL: 'debug' } });
});

afterAll(async () => {
  await room.stop();
});

/** Makes an agent in the real room service, as auth does on approval. */
async function agent(agentName: string): Promise<string> {
  const client = new (roomProto().RoomService)(`127.0.0.1:${room.port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  const made = await unaryCall<UpsertAgentResponse__Output>(DEADLINE, (metadata, options, callback) =>
    client.upsertAgent({ agent: { agentName, humanLabel: 'Ada', scopes: ['messages:read', 'messages:write'] } }, metadata, options, callback),
  );
  client.close();
  return made.agent?.id ?? '';
}

function connect(port: number): MessagingServiceClient {
  return new (messagingProto().MessagingService)(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
}

type Unary = (
  request: object,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, value?: unknown) => void,
) => grpc.ClientUnaryCall;

async function rejection(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DomainError);
  return error as DomainError;
}

/** A watch, with the moment it is positioned (initial metadata) and everything it received. */
function watch(
  client: MessagingServiceClient,
  agentId: string,
  afterId = '',
): { call: grpc.ClientReadableStream<WatchMessagesResponse__Output>; positioned: Promise<void>; seen: Message__Output[] } {
  const call = client.watchMessages({ agentId, afterId });
  const seen: Message__Output[] = [];
  call.on('data', (response: WatchMessagesResponse__Output) => {
    if (response.message) seen.push(response.message);
  });
  call.on('error', () => undefined);
  const positioned = new Promise<void>((resolve) => call.once('metadata', () => resolve()));
  return { call, positioned, seen };
}

async function until(condition: () => boolean, ms = 3_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.each([['memory'], ['redis']])('MessagingService over a loopback socket (%s)', (storage) => {
  let redis: LocalRedis | undefined;
  let messaging: RunningMessaging;
  let client: MessagingServiceClient;
  let alice: string;
  let bob: string;

  function send(from: string, to: string, text: string, via = 'VIA_REST', callKey: string = randomUUID()): Promise<SendMessageResponse__Output> {
    return unaryCall<SendMessageResponse__Output>(DEADLINE, (metadata, options, callback) =>
      client.sendMessage({ fromAgentId: from, toAgentId: to, text, via: via as 'VIA_REST', callKey }, metadata, options, callback),
    );
  }

  function list(agentId: string, limit: number, cursor = ''): Promise<ListMessagesResponse__Output> {
    return unaryCall<ListMessagesResponse__Output>(DEADLINE, (metadata, options, callback) =>
      client.listMessages({ agentId, limit, cursor }, metadata, options, callback),
    );
  }

  beforeAll(async () => {
    redis = storage === 'redis' ? await startRedisServer() : undefined;
    messaging = await start(
      loadConfig(messagingEnv, {
        ...env,
        MESSAGING_GRPC_ADDR: '127.0.0.1:0',
        ROOM_ADDR: `127.0.0.1:${room.port}`,
        ...(redis ? { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'grpc' } : {}),
      }),
    );
    expect(messaging.store.kind).toBe(storage);
    client = connect(messaging.port);
    alice = await agent('alice');
    bob = await agent('bob');
  });

  afterAll(async () => {
    client.close();
    await messaging.stop();
    await redis?.stop();
  });

  it("sends a message with both agents' names, the via and the time, into the recipient's inbox only", async () => {
    const { message } = await send(alice, bob, 'hello bob', 'VIA_A2A');
    expect(message).toMatchObject({ fromAgentId: alice, fromAgentName: 'alice', toAgentId: bob, toAgentName: 'bob', text: 'hello bob', via: 'VIA_A2A' });
    expect(message?.id).toMatch(/^\d+-\d+$/);
    expect(Date.parse(message?.createdAt ?? '')).toBeGreaterThan(Date.now() - 60_000);
    expect((await list(bob, 1)).messages[0]).toEqual(message);
    expect((await list(alice, 50)).messages.map((m) => m.text)).not.toContain('hello bob');
  });

  it('lets an agent send to itself (a note to self)', async () => {
    const { message } = await send(alice, alice, 'remember the milk');
    expect(message).toMatchObject({ fromAgentId: alice, toAgentId: alice, fromAgentName: 'alice', toAgentName: 'alice' });
    expect((await list(alice, 1)).messages[0]?.text).toBe('remember the milk');
  });

  it('lists an inbox newest first in pages whose cursor survives new messages', async () => {
    const carol = await agent('carol');
    for (let i = 1; i <= 5; i += 1) await send(alice, carol, `page ${i}`);
    const first = await list(carol, 2);
    expect(first.messages.map((m) => m.text)).toEqual(['page 5', 'page 4']);
    expect(first.hasMore).toBe(true);
    await send(bob, carol, 'page 6');
    const second = await list(carol, 2, first.nextCursor);
    expect(second.messages.map((m) => m.text)).toEqual(['page 3', 'page 2']);
    const third = await list(carol, 2, second.nextCursor);
    expect(third.messages.map((m) => m.text)).toEqual(['page 1']);
    expect(third).toMatchObject({ hasMore: false, nextCursor: '' });
    expect((await list(carol, 0)).messages).toHaveLength(6);
  });

  it('answers INVALID_ARGUMENT for a cursor it did not issue, a limit out of range, and no inbox', async () => {
    expect((await rejection(list(bob, 2, 'bm90LWEtY3Vyc29y'))).slug).toBe('invalid-cursor');
    expect((await rejection(list(bob, 51))).code).toBe('invalid_request');
    expect((await rejection(list('', 5))).code).toBe('invalid_request');
    expect((await rejection(list('a_x}:{other', 5))).code).toBe('invalid_request');
  });

  it('refuses a message to an unknown agent with NOT_FOUND carried as agent-not-found naming "to"', async () => {
    for (const to of ['a_nobody000001', 'not an id', '']) {
      const error = await rejection(send(alice, to, 'anyone there?'));
      expect(error.slug).toBe('agent-not-found');
      expect(error.status).toBe(404);
      expect(error.fields).toEqual({ parameter: 'to' });
    }
    expect((await rejection(send('a_ghost0000001', bob, 'boo'))).slug).toBe('agent-not-found');
  });

  it('refuses a message to an agent that blocks the sender or whose policy refuses it, in the same words, and stores nothing', async () => {
    const [pest, victim] = [await agent('pest'), await agent('victim')];
    await send(pest, victim, 'first words');
    const roomClient = new (roomProto().RoomService)(`127.0.0.1:${room.port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
    const roomCall = (method: 'blockAgent' | 'unblockAgent' | 'setContactPolicy', request: object): Promise<unknown> =>
      unaryCall(DEADLINE, (metadata, options, callback) => (roomClient[method].bind(roomClient) as unknown as Unary)(request, metadata, options, callback));
    await roomCall('blockAgent', { agentId: victim, blockedAgentId: pest });
    const blocked = await rejection(send(pest, victim, 'are you there?'));
    await roomCall('unblockAgent', { agentId: victim, blockedAgentId: pest });
    await roomCall('setContactPolicy', { agentId: victim, policy: 'closed' });
    const closed = await rejection(send(pest, victim, 'hello?'));
    roomClient.close();
    expect(blocked).toMatchObject({ slug: 'contact-refused', status: 403, fields: { parameter: 'victim' } });
    expect([blocked.detail, blocked.fields]).toEqual([closed.detail, closed.fields]);
    expect((await list(victim, 50)).messages.map((m) => m.text)).toEqual(['first words']);
    // The victim may still write: a closed policy is about what reaches it.
    await send(victim, pest, 'please stop');
  });

  it('lists the messages an agent sent, newest first, whoever they went to', async () => {
    const [writer, one, two] = [await agent('writer'), await agent('one'), await agent('two')];
    await send(writer, one, 'to one');
    await send(writer, two, 'to two');
    await send(one, writer, 'not by writer');
    const sent = await unaryCall<ListSentMessagesResponse__Output>(DEADLINE, (metadata, options, callback) =>
      client.listSentMessages({ agentId: writer, limit: 0 }, metadata, options, callback),
    );
    expect(sent.messages.map((m) => [m.text, m.toAgentId, m.fromAgentName])).toEqual([
      ['to two', two, 'writer'],
      ['to one', one, 'writer'],
    ]);
    expect((await list(two, 1)).messages[0]).toEqual(sent.messages[0]);
    const newest = await unaryCall<ListSentMessagesResponse__Output>(DEADLINE, (metadata, options, callback) =>
      client.listSentMessages({ agentId: writer, limit: 1 }, metadata, options, callback),
    );
    expect(newest.messages.map((m) => m.text)).toEqual(['to two']);
  });

  it('takes 2,000 code points (emoji included) and refuses 2,001, empty and blank text', async () => {
    await expect(send(alice, bob, '😀'.repeat(2_000))).resolves.toBeDefined();
    await expect(send(alice, bob, 'x'.repeat(2_000))).resolves.toBeDefined();
    const tooLong = await rejection(send(alice, bob, '😀'.repeat(2_001)));
    expect(tooLong).toMatchObject({ slug: 'text-too-long', status: 400 });
    expect(tooLong.fields).toEqual({ parameter: 'text', max_length: 2_000, length: 2_001 });
    for (const text of ['', ' ', '   \n\t ']) expect((await rejection(send(alice, bob, text))).slug).toBe('text-empty');
  });

  it('sends a call sent again once: the repeat answers the message its call key sent', async () => {
    const carol = await agent('carol');
    const first = await send(alice, carol, 'sent twice', 'VIA_REST', 'call-key-1');
    const again = await send(alice, carol, 'sent twice', 'VIA_REST', 'call-key-1');
    expect(again.message).toEqual(first.message);
    // Another call key is another message, though the text is the same.
    expect((await send(alice, carol, 'sent twice', 'VIA_REST', 'call-key-2')).message?.id).not.toBe(first.message?.id);
    const inbox = await list(carol, 10);
    expect(inbox.messages.map((m) => m.text)).toEqual(['sent twice', 'sent twice']);
  });

  it.each(['', 'k'.repeat(101)])('refuses a SendMessage without a call key of 1 to 100 characters (case %#)', async (callKey) => {
    const error = await rejection(send(alice, bob, 'no key', 'VIA_REST', callKey));
    expect(error.code).toBe('invalid_request');
    expect(error.fields).toEqual({ parameter: 'call_key' });
  });

  it('refuses a message without via', async () => {
    expect((await rejection(send(alice, bob, 'hi', 'VIA_UNSPECIFIED'))).code).toBe('invalid_request');
  });

  it('streams new messages of one inbox to a watcher once it is positioned, and nothing of other inboxes', async () => {
    const dave = await agent('dave');
    const watcher = watch(client, dave);
    await watcher.positioned;
    await send(alice, bob, 'not for dave');
    const { message } = await send(alice, dave, 'live for dave');
    await send(alice, bob, 'not for dave either');
    // A watch is in order: a message of another inbox would have come before this one.
    const { message: last } = await send(alice, dave, 'last for dave');
    await until(() => watcher.seen.length === 2);
    watcher.call.cancel();
    expect(watcher.seen).toEqual([message, last]);
  });

  it('resumes a watch after after_id: the missed messages in order, then live ones, nothing twice', async () => {
    const erin = await agent('erin');
    const { message: anchor } = await send(alice, erin, 'anchor');
    await send(alice, erin, 'missed 1');
    await send(bob, erin, 'missed 2');
    const watcher = watch(client, erin, anchor?.id ?? '');
    await watcher.positioned;
    await send(alice, erin, 'live');
    // One more: a message sent twice would have come before it.
    await send(bob, erin, 'live 2');
    await until(() => watcher.seen.length === 4);
    watcher.call.cancel();
    expect(watcher.seen.map((m) => m.text)).toEqual(['missed 1', 'missed 2', 'live', 'live 2']);
  });

  it('catches a watcher that stopped reading up from the store once it reads again: every message once, in order', async () => {
    const fay = await agent('fay');
    const watcher = watch(client, fay);
    await watcher.positioned;
    // Far more than the stream's windows hold: the server has to stop writing and come back for them.
    watcher.call.pause();
    const texts = Array.from({ length: 1_500 }, (_, i) => `while paused ${i} ${'x'.repeat(400)}`);
    for (const text of texts) await send(alice, fay, text);
    watcher.call.resume();
    await until(() => watcher.seen.length === texts.length, 15_000);
    await send(bob, fay, 'live again');
    await until(() => watcher.seen.length === texts.length + 1);
    watcher.call.cancel();
    expect(watcher.seen.map((m) => m.text)).toEqual([...texts, 'live again']);
  }, 60_000);

  it('refuses an after_id that is not a message id', async () => {
    const call = client.watchMessages({ agentId: bob, afterId: 'nope' });
    call.on('data', () => undefined);
    const error = await new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
    expect(error.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(fromServiceError(error)).toMatchObject({ slug: 'invalid-request', fields: { parameter: 'after_id' } });
  });

  it('answers grpc.health.v1 for the server and for the messaging service', async () => {
    const health = new HealthChecker(`127.0.0.1:${messaging.port}`);
    expect(await health.check('')).toBe('SERVING');
    expect(await health.check(MESSAGING_SERVICE_NAME)).toBe('SERVING');
    health.close();
  });
});

describe('the room behind messaging', () => {
  it("receives the caller's request id when messaging looks agents up", async () => {
    const messaging = await start(loadConfig(messagingEnv, { ...env, MESSAGING_GRPC_ADDR: '127.0.0.1:0', ROOM_ADDR: `127.0.0.1:${room.port}` }));
    const client = connect(messaging.port);
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    await runWithContext({ requestId: 'req-from-edge-77' }, () =>
      unaryCall<SendMessageResponse__Output>(DEADLINE, (metadata, options, callback) =>
        client.sendMessage({ fromAgentId: alice, toAgentId: bob, text: 'traced', via: 'VIA_REST', callKey: randomUUID() }, metadata, options, callback),
      ),
    );
    client.close();
    await messaging.stop();
    // The room writes its log line to its own stdout; it reaches us through the pipe a moment later.
    await expect
      .poll(roomLines)
      .toContainEqual(expect.objectContaining({ service: 'room', requestId: 'req-from-edge-77', method: 'AdmitMessage', code: 'OK' }));
  });

  it('being unreachable makes a send fail as a 503 problem, on time', async () => {
    const messaging = await start(
      loadConfig(messagingEnv, { ...env, MESSAGING_GRPC_ADDR: '127.0.0.1:0', ROOM_ADDR: `127.0.0.1:${await freePort()}`, GRPC_DEADLINE_MS: '500' }),
    );
    const client = connect(messaging.port);
    const started = Date.now();
    const error = await rejection(
      unaryCall<SendMessageResponse__Output>(DEADLINE, (metadata, options, callback) =>
        client.sendMessage(
          { fromAgentId: 'a_alice000001', toAgentId: 'a_bob00000001', text: 'hello?', via: 'VIA_REST', callKey: randomUUID() },
          metadata,
          options,
          callback,
        ),
      ),
    );
    client.close();
    await messaging.stop();
    expect(error).toMatchObject({ slug: 'unavailable', status: 503 });
    expect(Date.now() - started).toBeLessThan(DEADLINE);
  });
});

describe('graceful shutdown', () => {
  it('ends watch streams cleanly instead of cutting them, so watchers can resume', async () => {
    const messaging = await start(
      loadConfig(messagingEnv, { ...env, MESSAGING_GRPC_ADDR: '127.0.0.1:0', ROOM_ADDR: `127.0.0.1:${room.port}`, SHUTDOWN_GRACE_MS: '5000' }),
    );
    const client = connect(messaging.port);
    const watcher = watch(client, 'a_someone00001');
    const ended = new Promise<string>((resolve) => {
      watcher.call.on('end', () => resolve('end'));
      watcher.call.on('error', (e: grpc.ServiceError) => resolve(`error ${e.code}`));
    });
    await watcher.positioned;
    const started = Date.now();
    await messaging.stop();
    expect(await ended).toBe('end');
    // Well inside the grace period: the stream did not hold shutdown up.
    expect(Date.now() - started).toBeLessThan(2_000);
    client.close();
  });
});
