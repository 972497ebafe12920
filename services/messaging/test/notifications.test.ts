import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { loadConfig } from '@agentroom/kit/config';
import { CLIENT_OPTIONS, fromServiceError, unaryCall } from '@agentroom/kit/grpc';
import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { createLogger } from '@agentroom/kit/log';
import { registry } from '@agentroom/kit/metrics';
import { DomainError } from '@agentroom/kit/problems';
import { compareStreamIds, connectRedis, type Redis } from '@agentroom/kit/store';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import {
  type CreatePostResponse__Output,
  type ListMessagesResponse__Output,
  type ListNotificationsResponse__Output,
  type MarkNotificationsReadResponse__Output,
  messagingProto,
  type MessagingServiceClient,
  type Notification__Output,
  type Post__Output,
  roomProto,
  type RoomServiceClient,
  type SendMessageResponse__Output,
  type UpsertAgentResponse__Output,
  type WatchEventsResponse__Output,
  type WatchNotificationsResponse__Output,
} from '@agentroom/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  messagingEnv,
  type MessagingStore,
  Notifier,
  type NotifierOptions,
  RedisMessagingStore,
  type RoomPosts,
  type RunningMessaging,
  start,
} from '../src/index.js';
import { RoomGateway } from '../src/room.gateway.js';

const DEADLINE = 2_000;
const env = { SITE_URL: 'http://room.test', LOG_LEVEL: 'silent', SHUTDOWN_GRACE_MS: '1000' } as const;
/** Short enough that a takeover after a lapse fits in a test. */
const FAST: NotifierOptions = { leaseMs: 1_000, renewMs: 250, retryMs: 50, maxRetryMs: 250 };
const POLL = { timeout: 5_000, interval: 20 } as const;

/** The room service, its own process, as messaging meets it in production: over gRPC. */
let room: ServiceProcess;
let roomClient: RoomServiceClient;

beforeAll(async () => {
  room = await startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env });
  roomClient = new (roomProto().RoomService)(room.address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
});

afterAll(async () => {
  roomClient.close();
  await room.stop();
});

let agents = 0;

/** Makes an agent in the real room service, as auth does on approval; a name of its own, so `@name` is unambiguous. */
async function agent(name: string): Promise<string> {
  agents += 1;
  const made = await unaryCall<UpsertAgentResponse__Output>(DEADLINE, (metadata, options, callback) =>
    roomClient.upsertAgent(
      { agent: { agentName: `${name}${agents}`, humanLabel: 'Ada', scopes: ['posts:write', 'messages:read', 'messages:write'] } },
      metadata,
      options,
      callback,
    ),
  );
  return made.agent?.id ?? '';
}

/** A post made in the room, as edge makes it; `@<id>` in the text mentions that agent. */
async function post(agentId: string, text: string, replyTo = ''): Promise<Post__Output> {
  const made = await unaryCall<CreatePostResponse__Output>(DEADLINE, (metadata, options, callback) =>
    roomClient.createPost({ agentId, text, via: 'VIA_MCP', replyTo, callKey: randomUUID() }, metadata, options, callback),
  );
  if (!made.post) throw new Error('CreatePost answered no post');
  return made.post;
}

function connect(port: number): MessagingServiceClient {
  return new (messagingProto().MessagingService)(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
}

function startMessaging(redis: LocalRedis | undefined, notifier: NotifierOptions = FAST, prefix = 'notify'): Promise<RunningMessaging> {
  return start(
    loadConfig(messagingEnv, {
      ...env,
      MESSAGING_GRPC_ADDR: '127.0.0.1:0',
      ROOM_ADDR: room.address,
      ...(redis ? { REDIS_URL: redis.url, REDIS_KEY_PREFIX: prefix } : {}),
    }),
    undefined,
    { notifier },
  );
}

async function rejection(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DomainError);
  return error as DomainError;
}

/** What a notification is about, in a few words: its type and the post's or message's text. */
function summary(notification: Notification__Output): string {
  const type = notification.type.replace('NOTIFICATION_TYPE_', '').toLowerCase();
  return `${type}: ${notification.post?.text ?? notification.message?.text ?? '?'}`;
}

/** A client's calls, as Promises. */
function calls(client: MessagingServiceClient) {
  return {
    list: (agentId: string, options: { limit?: number; cursor?: string; unreadOnly?: boolean } = {}) =>
      unaryCall<ListNotificationsResponse__Output>(DEADLINE, (metadata, callOptions, callback) =>
        client.listNotifications(
          { agentId, limit: options.limit ?? 50, cursor: options.cursor ?? '', unreadOnly: options.unreadOnly ?? false },
          metadata,
          callOptions,
          callback,
        ),
      ),
    mark: (agentId: string, upTo: string) =>
      unaryCall<MarkNotificationsReadResponse__Output>(DEADLINE, (metadata, options, callback) =>
        client.markNotificationsRead({ agentId, upTo }, metadata, options, callback),
      ),
    send: (from: string, to: string, text: string) =>
      unaryCall<SendMessageResponse__Output>(DEADLINE, (metadata, options, callback) =>
        client.sendMessage({ fromAgentId: from, toAgentId: to, text, via: 'VIA_REST', callKey: randomUUID() }, metadata, options, callback),
      ),
    listMessages: (agentId: string, cursor: string) =>
      unaryCall<ListMessagesResponse__Output>(DEADLINE, (metadata, options, callback) =>
        client.listMessages({ agentId, limit: 1, cursor }, metadata, options, callback),
      ),
  };
}

/** A watch, with the moment it is positioned (initial metadata) and everything it received. */
function watch(client: MessagingServiceClient, agentId: string, afterId = '') {
  const call = client.watchNotifications({ agentId, afterId });
  const seen: Notification__Output[] = [];
  call.on('data', (response: WatchNotificationsResponse__Output) => {
    if (response.notification) seen.push(response.notification);
  });
  call.on('error', () => undefined);
  const positioned = new Promise<void>((resolve) => call.once('metadata', () => resolve()));
  return { call, positioned, seen };
}

async function until(condition: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function metricValue(name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  return values
    .filter((value) => (value as { metricName?: string }).metricName === undefined || (value as { metricName?: string }).metricName === `${name}_count`)
    .filter((value) => Object.entries(labels).every(([key, wanted]) => value.labels[key] === wanted))
    .reduce((sum, value) => sum + value.value, 0);
}

describe.each([['memory'], ['redis']])('notifications over gRPC, from a real room (%s)', (storage) => {
  let redis: LocalRedis | undefined;
  let messaging: RunningMessaging;
  let client: MessagingServiceClient;
  let api: ReturnType<typeof calls>;

  beforeAll(async () => {
    redis = storage === 'redis' ? await startRedisServer() : undefined;
    messaging = await startMessaging(redis);
    expect(messaging.store.kind).toBe(storage);
    client = connect(messaging.port);
    api = calls(client);
    await until(() => messaging.notifier.isFollowing);
  });

  afterAll(async () => {
    client.close();
    await messaging.stop();
    await redis?.stop();
  });

  const feed = async (agentId: string): Promise<string[]> => (await api.list(agentId)).notifications.map(summary);

  it('notifies an agent a post mentions, with the post as the room made it', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    const watcher = watch(client, bob);
    await watcher.positioned;
    const made = await post(alice, `hello @${bob}, see this`);
    await expect.poll(() => watcher.seen.length, POLL).toBe(1);
    watcher.call.cancel();
    const [notification] = watcher.seen;
    expect(notification).toMatchObject({ type: 'NOTIFICATION_TYPE_MENTION', read: false, message: null });
    expect(notification?.id).toMatch(/^\d+-\d+$/);
    // The post as CreatePost answered it, mentions and reply fields included: listing needs no call to the room.
    // (Save whom it was muted for: the room's own knowledge, which no notification carries.)
    // Internal fields of the room's post, which no notification shows: whom it mutes, and its trace (none: tracing is off here).
    const { mutedFor, traceparent, ...notified } = made;
    expect(mutedFor).toEqual([]);
    expect(traceparent).toBe('');
    expect(notification?.post).toEqual(notified);
    expect(made.mentions).toEqual([{ agentId: bob, agentName: expect.stringMatching(/^bob/) }]);
    expect((await api.list(bob)).notifications).toEqual(watcher.seen);
    expect(await feed(alice)).toEqual([]);
  });

  it('notifies the author of the post a reply answers, once, as a reply, also when the reply mentions it; others it mentions get a mention', async () => {
    const [alice, bob, carol] = [await agent('alice'), await agent('bob'), await agent('carol')];
    const root = await post(alice, 'a question');
    const reply = await post(bob, `@${alice} here is an answer, cc @${carol}`, root.id);
    expect(reply.replyToAgentId).toBe(alice);
    // A reply to the reply: bob is answered, in alice's thread.
    const nested = await post(carol, 'and a follow-up', reply.id);
    await expect.poll(() => feed(bob), POLL).toEqual(['reply: and a follow-up']);
    await expect.poll(() => feed(carol), POLL).toEqual([`mention: @${alice} here is an answer, cc @${carol}`]);
    expect(await feed(alice)).toEqual([`reply: @${alice} here is an answer, cc @${carol}`]);
    const [toAlice] = (await api.list(alice)).notifications;
    expect(toAlice?.post).toMatchObject({ id: reply.id, replyTo: root.id, threadId: root.id, replyToAgentId: alice });
    expect((await api.list(bob)).notifications[0]?.post).toMatchObject({ id: nested.id, replyTo: reply.id, threadId: root.id, replyToAgentId: bob });
  });

  it('notifies no agent of a post it was muted for (it blocks the author): neither a mention nor a reply, and no event; others as usual', async () => {
    const [alice, bob, carol] = [await agent('alice'), await agent('bob'), await agent('carol')];
    const events = client.watchEvents({ afterId: '' });
    const seen: WatchEventsResponse__Output[] = [];
    events.on('data', (event: WatchEventsResponse__Output) => seen.push(event));
    events.on('error', () => undefined);
    await new Promise<void>((resolve) => events.once('metadata', () => resolve()));
    const root = await post(bob, 'a question of bob');
    await unaryCall(DEADLINE, (metadata, options, callback) => roomClient.blockAgent({ agentId: bob, blockedAgentId: alice }, metadata, options, callback));
    const muted = await post(alice, `@${bob} and @${carol}, an answer`, root.id);
    expect(muted.mutedFor).toEqual([bob]);
    await post(alice, `again @${bob}`);
    // Posts are handled in order: once carol's arrived, alice's two were handled.
    await post(carol, `@${bob} a word from carol`);
    await expect.poll(() => feed(bob), POLL).toEqual([`mention: @${bob} a word from carol`]);
    expect(await feed(carol)).toEqual([`mention: @${bob} and @${carol}, an answer`]);
    await expect.poll(() => seen.filter((event) => event.agentId === bob).length, POLL).toBe(1);
    events.cancel();
    expect(seen.filter((event) => event.agentId === bob).map((event) => event.notification?.post?.text)).toEqual([`@${bob} a word from carol`]);
  });

  it('never notifies an agent of its own post: a self-mention, a reply to itself', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    const mine = await post(alice, `a note to @${alice}`);
    await post(alice, `more, @${alice}`, mine.id);
    // Posts are handled in order: once this one arrived, the two before it were handled.
    await post(bob, `@${alice} ping`);
    await expect.poll(() => feed(alice), POLL).toEqual([`mention: @${alice} ping`]);
  });

  it('notifies the recipient of a direct message, a note to self too, with the message as the inbox holds it', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    const { message } = await api.send(alice, bob, 'hello bob');
    const [notification] = (await api.list(bob)).notifications;
    // In the same step as the inbox: there at once, no waiting.
    expect(notification).toMatchObject({ type: 'NOTIFICATION_TYPE_DIRECT_MESSAGE', post: null, read: false });
    expect(notification?.message).toEqual(message);
    await api.send(alice, alice, 'remember the milk');
    expect(await feed(alice)).toEqual(['direct_message: remember the milk']);
    expect(await feed(bob)).toEqual(['direct_message: hello bob']);
  });

  it("lists newest first in pages, with cursors bound to the agent's own feed", async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    for (let i = 1; i <= 5; i += 1) await api.send(alice, bob, `dm ${i}`);
    const first = await api.list(bob, { limit: 2 });
    expect(first.notifications.map(summary)).toEqual(['direct_message: dm 5', 'direct_message: dm 4']);
    expect(first).toMatchObject({ hasMore: true, unreadCount: 5, readUpTo: '' });
    await api.send(alice, bob, 'dm 6');
    const second = await api.list(bob, { limit: 2, cursor: first.nextCursor });
    expect(second.notifications.map(summary)).toEqual(['direct_message: dm 3', 'direct_message: dm 2']);
    const third = await api.list(bob, { limit: 2, cursor: second.nextCursor });
    expect(third.notifications.map(summary)).toEqual(['direct_message: dm 1']);
    expect(third).toMatchObject({ hasMore: false, nextCursor: '' });
    expect((await api.list(bob, { limit: 0 })).notifications).toHaveLength(6);
    // Another agent's feed, an inbox, and a forgery: none pages this feed; nor does this cursor page the inbox.
    await api.send(bob, alice, 'for alice');
    expect((await rejection(api.list(alice, { limit: 2, cursor: first.nextCursor }))).slug).toBe('invalid-cursor');
    const inbox = await api.listMessages(bob, '');
    expect((await rejection(api.list(bob, { limit: 2, cursor: inbox.nextCursor }))).slug).toBe('invalid-cursor');
    expect((await rejection(api.listMessages(bob, first.nextCursor))).slug).toBe('invalid-cursor');
    expect((await rejection(api.list(bob, { cursor: 'bm90LWEtY3Vyc29y' }))).slug).toBe('invalid-cursor');
    expect((await rejection(api.list(bob, { limit: 51 }))).code).toBe('invalid_request');
    expect((await rejection(api.list('a_x}:{other'))).code).toBe('invalid_request');
  });

  it('marks read up to a notification, never backwards; lists the unread only when asked, with read flags and counts', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    for (let i = 1; i <= 4; i += 1) await api.send(alice, bob, `m${i}`);
    const all = (await api.list(bob)).notifications;
    const [m4, m3, m2] = all;
    expect(await api.mark(bob, m3?.id ?? '')).toEqual({ readUpTo: m3?.id, unreadCount: 1 });
    expect(await api.mark(bob, m2?.id ?? '')).toEqual({ readUpTo: m3?.id, unreadCount: 1 });
    const listed = await api.list(bob);
    expect(listed.notifications.map((n) => [summary(n), n.read])).toEqual([
      ['direct_message: m4', false],
      ['direct_message: m3', true],
      ['direct_message: m2', true],
      ['direct_message: m1', true],
    ]);
    expect(listed).toMatchObject({ unreadCount: 1, readUpTo: m3?.id });
    const unread = await api.list(bob, { unreadOnly: true });
    expect(unread.notifications.map((n) => n.id)).toEqual([m4?.id]);
    expect(await api.mark(bob, m4?.id ?? '')).toEqual({ readUpTo: m4?.id, unreadCount: 0 });
    expect((await api.list(bob, { unreadOnly: true })).notifications).toEqual([]);
  });

  it("refuses to mark read an id that is no notification of the agent's feed: NOT_FOUND, notification-not-found", async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    await api.send(alice, bob, 'one');
    const [mine] = (await api.list(bob)).notifications;
    for (const [agentId, upTo] of [
      [alice, mine?.id ?? ''],
      [bob, '1-0'],
      [bob, 'nope'],
      [bob, ''],
    ] as const) {
      const error = await rejection(api.mark(agentId, upTo));
      expect(error).toMatchObject({ slug: 'notification-not-found', code: 'not_found', status: 404 });
      expect(error.fields).toEqual({ parameter: 'up_to' });
    }
    expect((await api.list(bob)).readUpTo).toBe('');
  });

  it('streams the feed after after_id: the missed ones in order with their read flags, then live ones, nothing twice', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    await api.send(alice, bob, 'anchor');
    await api.send(alice, bob, 'missed 1');
    await post(alice, `missed 2, @${bob}`);
    await expect.poll(async () => (await api.list(bob)).notifications.length, POLL).toBe(3);
    const [missed2, missed1, anchor] = (await api.list(bob)).notifications;
    await api.mark(bob, missed1?.id ?? '');
    const watcher = watch(client, bob, anchor?.id);
    await watcher.positioned;
    await api.send(alice, bob, 'live');
    await post(alice, `live 2, @${bob}`);
    await expect.poll(() => watcher.seen.length, POLL).toBe(4);
    await new Promise((resolve) => setTimeout(resolve, 100));
    watcher.call.cancel();
    expect(watcher.seen.map((n) => [summary(n), n.read])).toEqual([
      ['direct_message: missed 1', true],
      [`mention: missed 2, @${bob}`, false],
      ['direct_message: live', false],
      [`mention: live 2, @${bob}`, false],
    ]);
    expect(watcher.seen[1]?.id).toBe(missed2?.id);
  });

  it('refuses an after_id that is not a notification id', async () => {
    const call = client.watchNotifications({ agentId: 'a_someone00001', afterId: 'nope' });
    call.on('data', () => undefined);
    const error = await new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
    expect(error.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(fromServiceError(error)).toMatchObject({ slug: 'invalid-request', fields: { parameter: 'after_id' } });
  });

  it("streams every agent's notifications as events, in one order, after after_id or from now on; refuses a malformed after_id", async () => {
    const [alice, bob, carol] = [await agent('alice'), await agent('bob'), await agent('carol')];
    const events = (afterId: string) => {
      const call = client.watchEvents({ afterId });
      const seen: WatchEventsResponse__Output[] = [];
      call.on('data', (response: WatchEventsResponse__Output) => seen.push(response));
      call.on('error', () => undefined);
      const positioned = new Promise<void>((resolve) => call.once('metadata', () => resolve()));
      return { call, seen, positioned };
    };
    const live = events('');
    await live.positioned;
    await post(alice, `to both @${bob} @${carol}`);
    await api.send(bob, carol, 'a message to carol');
    await until(() => live.seen.length === 3);
    expect(live.seen.map((event) => [event.agentId, summary(event.notification!)])).toEqual([
      [bob, `mention: to both @${bob} @${carol}`],
      [carol, `mention: to both @${bob} @${carol}`],
      [carol, 'direct_message: a message to carol'],
    ]);
    const ids = live.seen.map((event) => event.id);
    for (const id of ids) expect(id).toMatch(/^\d+-\d+$/);
    expect([...ids].sort(compareStreamIds)).toEqual(ids);
    // The notification as the agent's feed lists it (unread then).
    expect(live.seen[2]!.notification).toEqual({ ...(await api.list(carol)).notifications[0], read: false });
    live.call.cancel();
    // Resumed after the first: the others again, in order, then live ones.
    const resumed = events(ids[0]!);
    await resumed.positioned;
    await api.send(alice, bob, 'later');
    await until(() => resumed.seen.length === 3);
    expect(resumed.seen.slice(0, 2).map((event) => event.id)).toEqual(ids.slice(1));
    expect([resumed.seen[2]!.agentId, summary(resumed.seen[2]!.notification!)]).toEqual([bob, 'direct_message: later']);
    resumed.call.cancel();
    const refused = client.watchEvents({ afterId: 'yesterday' });
    const error = await new Promise<DomainError>((resolve) => refused.on('error', (e) => resolve(fromServiceError(e))));
    expect([error.slug, error.fields.parameter]).toEqual(['invalid-request', 'after_id']);
  });

  it('shows a removed post as its tombstone in every notification about it: lists, watches and events replayed', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    const before = client.watchEvents({});
    const events: WatchEventsResponse__Output[] = [];
    before.on('data', (response: WatchEventsResponse__Output) => events.push(response));
    before.on('error', () => undefined);
    await new Promise<void>((resolve) => before.once('metadata', () => resolve()));
    const made = await post(alice, `something that breaks the rules, @${bob}`);
    await expect.poll(() => feed(bob), POLL).toEqual([`mention: something that breaks the rules, @${bob}`]);
    await until(() => events.length === 1);
    before.cancel();
    const removed = await unaryCall<{ post: Post__Output | null }>(DEADLINE, (metadata, options, callback) =>
      roomClient.removePost({ postId: made.id, by: 'moderator' }, metadata, options, callback),
    );
    const removal = removed.post?.removal;
    expect(removal).toMatchObject({ postId: made.id, by: 'moderator' });
    // A notification keeps the post's fields but the room's internal muted_for.
    const { mutedFor: _mutedFor, traceparent: _traceparent, ...fields } = made;
    const tombstone = { ...fields, text: '', mentions: [], removal };
    // The notifier hears the removal from the room's watch.
    await expect.poll(async () => (await api.list(bob)).notifications[0]?.post, POLL).toEqual(tombstone);
    const replayed = watch(client, bob, '0-0');
    await until(() => replayed.seen.length === 1);
    replayed.call.cancel();
    expect(replayed.seen[0]?.post).toEqual(tombstone);
    const again = client.watchEvents({ afterId: '0-0' });
    const replayedEvents: WatchEventsResponse__Output[] = [];
    again.on('data', (response: WatchEventsResponse__Output) => replayedEvents.push(response));
    again.on('error', () => undefined);
    await until(() => replayedEvents.some((event) => event.id === events[0]?.id));
    again.cancel();
    expect(replayedEvents.find((event) => event.id === events[0]?.id)?.notification?.post).toEqual(tombstone);
  });

  it('notes a removal through RedactPost alike, once: the first removal stays', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    const made = await post(alice, `hello @${bob}`);
    await expect.poll(() => feed(bob), POLL).toEqual([`mention: hello @${bob}`]);
    const redact = (by: string, removedAt: string) =>
      unaryCall<object>(DEADLINE, (metadata, options, callback) =>
        client.redactPost({ removal: { postId: made.id, by, removedAt } }, metadata, options, callback),
      );
    await redact('human', '2026-03-01T12:00:00.000Z');
    await redact('moderator', '2026-03-02T12:00:00.000Z');
    expect((await api.list(bob)).notifications[0]?.post).toMatchObject({
      text: '',
      mentions: [],
      removal: { postId: made.id, by: 'human', removedAt: '2026-03-01T12:00:00.000Z' },
    });
    expect((await rejection(redact('someone', '2026-03-01T12:00:00.000Z'))).slug).toBe('invalid-request');
  });

  it('counts the notifications it appends by type, and the lag of the posts it notifies of', async () => {
    const [alice, bob, carol] = [await agent('alice'), await agent('bob'), await agent('carol')];
    const before = {
      mention: await metricValue('agentroom_notifications_appended_total', { type: 'mention' }),
      reply: await metricValue('agentroom_notifications_appended_total', { type: 'reply' }),
      dm: await metricValue('agentroom_notifications_appended_total', { type: 'direct_message' }),
      lag: await metricValue('agentroom_notifier_lag_seconds'),
    };
    const root = await post(alice, 'root');
    await post(bob, `@${alice} @${carol} answer`, root.id);
    await api.send(alice, bob, 'dm');
    await expect.poll(() => feed(carol), POLL).toHaveLength(1);
    expect(await metricValue('agentroom_notifications_appended_total', { type: 'mention' })).toBe(before.mention + 1);
    expect(await metricValue('agentroom_notifications_appended_total', { type: 'reply' })).toBe(before.reply + 1);
    expect(await metricValue('agentroom_notifications_appended_total', { type: 'direct_message' })).toBe(before.dm + 1);
    // One post notified (root notified nobody): one observation.
    expect(await metricValue('agentroom_notifier_lag_seconds')).toBe(before.lag + 1);
  });
});

describe('the notifier across restarts and replicas (one Redis)', () => {
  let redis: LocalRedis;
  let reader: MessagingStore;
  let client: Redis;

  beforeAll(async () => {
    redis = await startRedisServer();
    client = connectRedis(redis.url, 'notifier-test');
    reader = new RedisMessagingStore(client, 'replicas');
  });

  afterAll(async () => {
    await reader.close();
    await client.quit();
    await redis.stop();
  });

  /** What an agent's feed holds, oldest first: the post ids notified. */
  async function notifiedPosts(agentId: string): Promise<string[]> {
    return (await reader.listNotifications(agentId, 50)).items.map((n) => (n.type === 'direct_message' ? `dm ${n.message.id}` : n.post.id)).reverse();
  }

  it('stopped while posts are made and started again: every notification arrives, none twice', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    let messaging = await startMessaging(redis, FAST, 'replicas');
    await expect.poll(() => messaging.notifier.isFollowing, POLL).toBe(true);
    const made = [await post(alice, `before the stop @${bob}`)];
    const asked = await post(bob, 'a question of mine');
    await expect.poll(() => notifiedPosts(bob), POLL).toEqual(made.map((p) => p.id));
    await messaging.stop();
    // While no messaging runs: mentions and replies pile up in the room only.
    for (let i = 1; i <= 5; i += 1) made.push(await post(alice, `while stopped ${i} @${bob}`));
    made.push(await post(alice, 'a reply while stopped', asked.id));
    messaging = await startMessaging(redis, FAST, 'replicas');
    made.push(await post(alice, `after the start @${bob}`));
    await expect.poll(() => notifiedPosts(bob), POLL).toEqual(made.map((p) => p.id));
    // Nothing arrives twice later either.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await notifiedPosts(bob)).toEqual(made.map((p) => p.id));
    await messaging.stop();
  });

  it('two instances on one Redis: one follows at a time, each post is notified once, and the other takes over when it stops', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    const [first, second] = [await startMessaging(redis, FAST, 'replicas'), await startMessaging(redis, FAST, 'replicas')];
    await expect.poll(() => first.notifier.isFollowing || second.notifier.isFollowing, POLL).toBe(true);
    const [holder, other] = first.notifier.isFollowing ? [first, second] : [second, first];
    const made: Post__Output[] = [];
    for (let i = 1; i <= 10; i += 1) made.push(await post(alice, `post ${i} @${bob}`));
    await expect.poll(() => notifiedPosts(bob), POLL).toEqual(made.map((p) => p.id));
    expect(other.notifier.isFollowing).toBe(false);
    // The holder stops (a rollout): it gives the lease up, and the other follows from where it stopped.
    await holder.stop();
    for (let i = 11; i <= 15; i += 1) made.push(await post(alice, `post ${i} @${bob}`));
    await expect.poll(() => other.notifier.isFollowing, POLL).toBe(true);
    made.push(await post(alice, `post 16 @${bob}`));
    await expect.poll(() => notifiedPosts(bob), POLL).toEqual(made.map((p) => p.id));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await notifiedPosts(bob)).toEqual(made.map((p) => p.id));
    await other.stop();
  });

  /**
   * A store whose calls can be held (a process paused, or cut off from Redis): held calls run once
   * it is let go. And one that fails storing the position once, as a crash right after appending would.
   */
  class HeldStore extends RedisMessagingStore {
    held = false;
    failNextAdvance = false;
    readonly handedOver: string[] = [];
    private readonly waiting: (() => void)[] = [];

    private async gate(): Promise<void> {
      if (this.held) await new Promise<void>((resolve) => this.waiting.push(resolve));
    }

    letGo(): void {
      this.held = false;
      for (const resolve of this.waiting.splice(0)) resolve();
    }

    override async acquireNotifierLease(owner: string, ttlMs: number): Promise<boolean> {
      await this.gate();
      return super.acquireNotifierLease(owner, ttlMs);
    }

    override async notifyPost(...args: Parameters<RedisMessagingStore['notifyPost']>): ReturnType<RedisMessagingStore['notifyPost']> {
      await this.gate();
      this.handedOver.push(args[0].id);
      return super.notifyPost(...args);
    }

    override async advanceNotifierPosition(owner: string, postId: string): Promise<boolean> {
      await this.gate();
      if (this.failNextAdvance) {
        this.failNextAdvance = false;
        throw new Error('the process died before it stored its position');
      }
      return super.advanceNotifierPosition(owner, postId);
    }
  }

  it('handles a post again when it stopped between appending and storing its position, and notifies nobody twice', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    const gateway = new RoomGateway(room.address, DEADLINE);
    const store = new HeldStore(client, 'crash');
    const notifier = new Notifier(store, gateway, createLogger('messaging', 'silent', 'json'), FAST);
    notifier.start();
    await expect.poll(() => notifier.isFollowing, POLL).toBe(true);
    store.failNextAdvance = true;
    const crashed = await post(alice, `appended, then a crash @${bob}`);
    const next = await post(alice, `the next one @${bob}`);
    await expect.poll(async () => (await store.listNotifications(bob, 10)).items.length, POLL).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await notifier.stop();
    gateway.close();
    // It was handed over twice (the position still named the post before it), and appended once.
    expect(store.handedOver.filter((id) => id === crashed.id)).toHaveLength(2);
    expect((await store.listNotifications(bob, 10)).items.map((n) => (n.type === 'direct_message' ? '' : n.post.id))).toEqual([next.id, crashed.id]);
    expect(await store.notifierPosition()).toBe(next.id);
  });

  it('resumes a broken watch after the stored position: nothing missed, nothing twice', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    const gateway = new RoomGateway(room.address, DEADLINE);
    // Every watch breaks once it delivered two posts, as a room restarting or a connection cut would.
    const afters: string[] = [];
    const breaking: RoomPosts = {
      newestPostId: () => gateway.newestPostId(),
      postAuthor: (postId) => gateway.postAuthor(postId),
      watchPosts: (afterId) => {
        afters.push(afterId);
        const call = gateway.watchPosts(afterId);
        let delivered = 0;
        call.on('data', () => {
          delivered += 1;
          if (delivered === 2) setImmediate(() => call.cancel());
        });
        return call;
      },
    };
    const store = new RedisMessagingStore(client, 'broken');
    // 300 ms between a broken watch and the next: posts are made in that gap.
    const notifier = new Notifier(store, breaking, createLogger('messaging', 'silent', 'json'), { ...FAST, retryMs: 300, maxRetryMs: 300 });
    notifier.start();
    await expect.poll(() => notifier.isFollowing, POLL).toBe(true);
    const ids = async (): Promise<string[]> =>
      (await store.listNotifications(bob, 20)).items.map((n) => (n.type === 'direct_message' ? '' : n.post.id)).reverse();
    const made = [await post(alice, `post 1 @${bob}`), await post(alice, `post 2 @${bob}`)];
    for (let round = 1; round <= 3; round += 1) {
      // Broken: nobody watches the room until the notifier watches again, after its stored position.
      await expect.poll(() => notifier.isFollowing, POLL).toBe(false);
      made.push(await post(alice, `in gap ${round}, first @${bob}`), await post(alice, `in gap ${round}, second @${bob}`));
      // Replayed: two posts, which break this watch too.
      await expect.poll(ids, POLL).toEqual(made.map((p) => p.id));
    }
    await notifier.stop();
    gateway.close();
    // It watched again and again, each time after the last post it had stored.
    expect(afters.length).toBeGreaterThanOrEqual(4);
    for (const after of afters.slice(1)) expect(made.map((p) => p.id)).toContain(after);
    expect(await ids()).toEqual(made.map((p) => p.id));
  });

  it('takes over from a holder that stopped answering once its lease lapses; the old holder, back, moves nothing and notifies nobody twice', async () => {
    const [alice, bob] = [await agent('alice'), await agent('bob')];
    const log = createLogger('messaging', 'silent', 'json');
    const [gatewayA, gatewayB] = [new RoomGateway(room.address, DEADLINE), new RoomGateway(room.address, DEADLINE)];
    const [storeA, storeB] = [new HeldStore(client, 'lapse'), new HeldStore(client, 'lapse')];
    const a = new Notifier(storeA, gatewayA, log, FAST);
    a.start();
    await expect.poll(() => a.isFollowing, POLL).toBe(true);
    const b = new Notifier(storeB, gatewayB, log, FAST);
    b.start();
    const made = [await post(alice, `while a holds it @${bob}`)];
    await expect.poll(async () => (await storeB.listNotifications(bob, 10)).items.length, POLL).toBe(1);
    // A is done with that post: its event appended and its position stored (else it would wait on the store, not on the room).
    await expect.poll(() => storeB.notifierPosition(), POLL).toBe(made[0]?.id);
    expect(b.isFollowing).toBe(false);
    // A stops answering (paused, or cut off): its renewals and its work on the next posts wait.
    storeA.held = true;
    made.push(await post(alice, `while a is away @${bob}`));
    await expect.poll(() => b.isFollowing, { ...POLL, timeout: 5_000 }).toBe(true);
    made.push(await post(alice, `after the takeover @${bob}`));
    const ids = async (): Promise<string[]> =>
      (await storeB.listNotifications(bob, 10)).items.map((n) => (n.type === 'direct_message' ? '' : n.post.id)).reverse();
    await expect.poll(ids, POLL).toEqual(made.map((p) => p.id));
    // A is back: what it held runs, but it holds the lease no more.
    storeA.letGo();
    await expect.poll(() => a.isFollowing, POLL).toBe(false);
    made.push(await post(alice, `with a back @${bob}`));
    await expect.poll(ids, POLL).toEqual(made.map((p) => p.id));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await ids()).toEqual(made.map((p) => p.id));
    expect(storeA.handedOver).toContain(made[1]?.id);
    expect(await storeB.notifierPosition()).toBe(made.at(-1)?.id);
    await Promise.all([a.stop(), b.stop()]);
    gatewayA.close();
    gatewayB.close();
  });
});
