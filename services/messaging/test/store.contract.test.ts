import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { type Cluster, compareStreamIds, connectRedis, connectRedisCluster, followFeed, keysMatching, type Redis } from '@agentroom/kit/store';
import { type LocalRedisCluster, startRedisCluster } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MessageRecord } from '../src/messages.js';
import type { NotificationRecord, NotifiedPost, PostTarget } from '../src/notifications.js';
import type { MessagingStore, NewMessage } from '../src/store.js';
import { MemoryMessagingStore } from '../src/store-memory.js';
import { RedisMessagingStore } from '../src/store-redis.js';

let redisServer: LocalRedis;
let redis: Redis;
/** One three-master Redis Cluster for the whole file: it takes about two seconds to start. */
let cluster: LocalRedisCluster;
let clusterClient: Cluster;
let prefixes = 0;
const opened: MessagingStore[] = [];

beforeAll(async () => {
  [redisServer, cluster] = await Promise.all([startRedisServer(), startRedisCluster()]);
  redis = connectRedis(redisServer.url, 'messaging-store-test');
  clusterClient = connectRedisCluster(cluster.nodes, 'messaging-store-test');
});

afterAll(async () => {
  for (const store of opened) await store.close();
  await redis.quit();
  await redisServer.stop();
  await clusterClient.quit();
  await cluster.stop();
});

function track<T extends MessagingStore>(store: T): T {
  opened.push(store);
  return store;
}

/** A store of each kind; `maxLength` caps inboxes, `feedMaxLength` notification feeds. */
const implementations: [string, (maxLength?: number, feedMaxLength?: number) => MessagingStore][] = [
  ['memory', (maxLength, feedMaxLength) => track(new MemoryMessagingStore(undefined, maxLength, feedMaxLength))],
  ['redis', (maxLength, feedMaxLength) => track(new RedisMessagingStore(redis, `ms${(prefixes += 1)}`, maxLength, feedMaxLength))],
  ['redis cluster', (maxLength, feedMaxLength) => track(new RedisMessagingStore(clusterClient, `ms${(prefixes += 1)}`, maxLength, feedMaxLength))],
];

const ALICE = 'a_alice000001';
const BOB = 'a_bob00000001';
const CAROL = 'a_carol000001';

function message(text: string, to = BOB, from = ALICE): NewMessage {
  return { fromAgentId: from, fromAgentName: from === ALICE ? 'alice' : 'bob', toAgentId: to, toAgentName: to === ALICE ? 'alice' : 'bob', text, via: 'rest' };
}

async function until(condition: () => boolean, ms = 3_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.each(implementations)('MessagingStore contract: %s', (_name, makeStore) => {
  it('notes each removed post once, the first removal kept, and answers those of the posts asked', async () => {
    const store = makeStore();
    expect(await store.removalsOf(['1-0'])).toEqual(new Map());
    await store.redactPost({ postId: '1-0', by: 'human', removedAt: '2026-03-01T12:00:00.000Z' });
    await store.redactPost({ postId: '1-0', by: 'moderator', removedAt: '2026-03-02T12:00:00.000Z' });
    await store.redactPost({ postId: '2-0', by: 'moderator', removedAt: '2026-03-03T12:00:00.000Z' });
    expect(await store.removalsOf(['1-0', '3-0', '1-0'])).toEqual(new Map([['1-0', { postId: '1-0', by: 'human', removedAt: '2026-03-01T12:00:00.000Z' }]]));
    expect([...(await store.removalsOf(['2-0', '1-0'])).keys()].sort()).toEqual(['1-0', '2-0']);
    expect(await store.removalsOf([])).toEqual(new Map());
  });

  it("appends to the recipient's inbox with stream ids and lists it newest first", async () => {
    const store = makeStore();
    const { message: a } = await store.appendMessage(message('first'));
    const { message: b } = await store.appendMessage(message('second'));
    expect(a.id).toMatch(/^\d+-\d+$/);
    expect(a.createdAt).toBe(new Date(Number(a.id.split('-')[0])).toISOString());
    expect(b).toEqual({
      id: b.id,
      fromAgentId: ALICE,
      fromAgentName: 'alice',
      toAgentId: BOB,
      toAgentName: 'bob',
      text: 'second',
      via: 'rest',
      createdAt: b.createdAt,
    });
    const page = await store.listInbox(BOB, 10);
    expect(page.items).toEqual([b, a]);
    expect(page.hasMore).toBe(false);
  });

  it('sends one message per call key: a repeat from the same sender to the same recipient answers the first and appends nothing', async () => {
    const store = makeStore();
    const first = await store.appendMessage({ ...message('once'), callKey: 'k1' });
    expect(first.again).toBeUndefined();
    // A repeat, even with other text (a key names the call, not its content), answers what was sent.
    const repeat = await store.appendMessage({ ...message('once, sent again'), callKey: 'k1' });
    expect(repeat).toEqual({ message: first.message, again: true });
    // The same key from another sender, or to another recipient, is another call; so is another key.
    const otherSender = await store.appendMessage({ ...message('from carol', BOB, CAROL), callKey: 'k1' });
    const otherRecipient = await store.appendMessage({ ...message('to carol', CAROL), callKey: 'k1' });
    const otherKey = await store.appendMessage({ ...message('twice'), callKey: 'k2' });
    for (const sent of [otherSender, otherRecipient, otherKey]) expect(sent.again).toBeUndefined();
    expect((await store.listInbox(BOB, 10)).items.map((m) => m.text)).toEqual(['twice', 'from carol', 'once']);
    expect((await store.listInbox(CAROL, 10)).items.map((m) => m.text)).toEqual(['to carol']);
    // The repeat added no notification and no event.
    expect((await store.listNotifications(BOB, 10)).items).toHaveLength(3);
    expect(await store.events().readAfter('0-0', 10)).toHaveLength(4);
    // Without a key, every call sends.
    await store.appendMessage(message('no key'));
    await store.appendMessage(message('no key'));
    expect((await store.listInbox(BOB, 10)).items.map((m) => m.text).slice(0, 2)).toEqual(['no key', 'no key']);
  });

  it("keeps inboxes apart: a message is only in its recipient's inbox", async () => {
    const store = makeStore();
    await store.appendMessage(message('to bob', BOB, ALICE));
    await store.appendMessage(message('to alice', ALICE, BOB));
    expect((await store.listInbox(BOB, 10)).items.map((m) => m.text)).toEqual(['to bob']);
    expect((await store.listInbox(ALICE, 10)).items.map((m) => m.text)).toEqual(['to alice']);
    expect((await store.listInbox('a_nobody00001', 10)).items).toEqual([]);
  });

  it('keeps text exactly, including emoji, newlines, markup and JSON', async () => {
    const store = makeStore();
    const text = '😀 <b>bold</b>\n  "quoted" & {"json": [1]} done';
    await store.appendMessage(message(text));
    expect((await store.listInbox(BOB, 1)).items[0]?.text).toBe(text);
  });

  it('pages backwards from a position that stays stable while new messages arrive', async () => {
    const store = makeStore();
    for (let i = 1; i <= 5; i += 1) await store.appendMessage(message(`m${i}`));
    const first = await store.listInbox(BOB, 2);
    expect(first.items.map((m) => m.text)).toEqual(['m5', 'm4']);
    expect(first.hasMore).toBe(true);
    await store.appendMessage(message('m6'));
    const second = await store.listInbox(BOB, 2, first.items.at(-1)?.id);
    expect(second.items.map((m) => m.text)).toEqual(['m3', 'm2']);
    const third = await store.listInbox(BOB, 2, second.items.at(-1)?.id);
    expect(third.items.map((m) => m.text)).toEqual(['m1']);
    expect(third.hasMore).toBe(false);
  });

  it('reads an inbox after a position, oldest first, at most the count asked', async () => {
    const store = makeStore();
    const made: MessageRecord[] = [];
    for (let i = 1; i <= 4; i += 1) made.push((await store.appendMessage(message(`r${i}`))).message);
    await store.appendMessage(message('elsewhere', ALICE));
    const inbox = store.inbox(BOB);
    expect((await inbox.readAfter(made[0]!.id, 2)).map((m) => m.text)).toEqual(['r2', 'r3']);
    expect((await inbox.readAfter('0-0', 10)).map((m) => m.text)).toEqual(['r1', 'r2', 'r3', 'r4']);
    expect(await inbox.readAfter(made[3]!.id, 10)).toEqual([]);
  });

  it("tells an inbox's subscribers of each new message to it, in order, and of nothing else", async () => {
    const store = makeStore();
    const seen: string[] = [];
    const others: string[] = [];
    const unsubscribe = await store.inbox(BOB).subscribe((m) => seen.push(m.text));
    const unsubscribeOthers = await store.inbox(ALICE).subscribe((m) => others.push(m.text));
    await store.appendMessage(message('live1'));
    await store.appendMessage(message('live2'));
    await until(() => seen.length === 2);
    unsubscribe();
    await store.appendMessage(message('after'));
    await new Promise((resolve) => setTimeout(resolve, 100));
    unsubscribeOthers();
    expect(seen).toEqual(['live1', 'live2']);
    expect(others).toEqual([]);
  });

  it('shares one inbox between several subscribers; one leaving does not stop the others', async () => {
    const store = makeStore();
    const first: string[] = [];
    const second: string[] = [];
    const leaveFirst = await store.inbox(BOB).subscribe((m) => first.push(m.text));
    const leaveSecond = await store.inbox(BOB).subscribe((m) => second.push(m.text));
    await store.appendMessage(message('both'));
    await until(() => first.length === 1 && second.length === 1);
    leaveFirst();
    await store.appendMessage(message('second only'));
    await until(() => second.length === 2);
    leaveSecond();
    // Watching again after everyone left works like the first time.
    const again: string[] = [];
    const leaveAgain = await store.inbox(BOB).subscribe((m) => again.push(m.text));
    await store.appendMessage(message('again'));
    await until(() => again.length === 1);
    leaveAgain();
    expect(first).toEqual(['both']);
    expect(second).toEqual(['both', 'second only']);
    expect(again).toEqual(['again']);
  });

  it('resumes an inbox after an id with nothing missed and nothing twice, while messages keep coming', async () => {
    const store = makeStore();
    const before: MessageRecord[] = [];
    for (let i = 1; i <= 3; i += 1) before.push((await store.appendMessage(message(`b${i}`))).message);
    const seen: string[] = [];
    const stop = new AbortController();
    let positioned = false;
    const following = followFeed(store.inbox(BOB), before[0]!.id, (m) => seen.push(m.text), stop.signal, { onPositioned: () => (positioned = true) });
    // Messages written while the replay runs must arrive exactly once, after the replayed ones.
    await Promise.all([store.appendMessage(message('c1')), store.appendMessage(message('c2')), store.appendMessage(message('not mine', ALICE))]);
    await until(() => seen.length === 4 && positioned);
    await store.appendMessage(message('c3'));
    await until(() => seen.length === 5);
    stop.abort();
    await following;
    expect(seen).toEqual(['b2', 'b3', 'c1', 'c2', 'c3']);
  });

  it('follows an inbox from now on: once positioned, every later message arrives', async () => {
    const store = makeStore();
    await store.appendMessage(message('old'));
    const seen: string[] = [];
    const stop = new AbortController();
    const ready = new Promise<void>((resolve) => {
      void followFeed(store.inbox(BOB), undefined, (m) => seen.push(m.text), stop.signal, { onPositioned: resolve });
    });
    await ready;
    await store.appendMessage(message('new'));
    await until(() => seen.length === 1);
    stop.abort();
    expect(seen).toEqual(['new']);
  });

  it('caps an inbox: the newest messages are kept, the oldest dropped once it holds well over the cap', async () => {
    const store = makeStore(10);
    const made: MessageRecord[] = [];
    for (let i = 1; i <= 300; i += 1) made.push((await store.appendMessage(message(`n${i}`))).message);
    const kept = await store.inbox(BOB).readAfter('0-0', 1_000);
    // Redis trims whole stream nodes (MAXLEN ~), so it may keep somewhat more than the cap; never fewer.
    expect(kept.length).toBeGreaterThanOrEqual(10);
    expect(kept.length).toBeLessThan(300);
    expect(kept.slice(-10)).toEqual(made.slice(-10));
    expect((await store.listInbox(BOB, 1)).items[0]).toEqual(made.at(-1));
  });

  it('answers a ping', async () => {
    await expect(makeStore().ping()).resolves.toBeUndefined();
  });
});

/** Post ids as the room makes them, increasing: the notifier hands posts over in the room's order. */
let postMs = Date.now();
function nextPostId(): string {
  postMs += 1;
  return `${postMs}-0`;
}

/** A post of the room as the notifier hands it over: by alice unless `extra` says otherwise. */
function roomPost(text: string, extra: Partial<NotifiedPost> = {}): NotifiedPost {
  const id = extra.id ?? nextPostId();
  return {
    id,
    agentId: ALICE,
    agentName: 'alice',
    humanLabel: 'Ada',
    text,
    via: 'mcp',
    createdAt: new Date(Number(id.split('-')[0])).toISOString(),
    replyTo: '',
    threadId: '',
    replyToAgentId: '',
    mentions: [],
    ...extra,
  };
}

const mention = (agentId: string): PostTarget => ({ agentId, type: 'mention' });

function textOf(notification: NotificationRecord): string {
  return notification.type === 'direct_message' ? notification.message.text : notification.post.text;
}

/** `count` mentions of `agentId` (posts n1, n2, …), oldest first. */
async function mentions(store: MessagingStore, count: number, agentId = BOB): Promise<NotificationRecord[]> {
  const made: NotificationRecord[] = [];
  for (let i = 1; i <= count; i += 1) made.push(...(await store.notifyPost(roomPost(`n${i}`), [mention(agentId)])).appended);
  return made;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe.each(implementations)('MessagingStore contract, notifications: %s', (_name, makeStore) => {
  it("appends a post's notification to each target's feed with the post as it was, a message's with the message, and lists a feed newest first", async () => {
    const store = makeStore();
    const text = '😀 <b>hi</b> @bob\n  "quoted" & {"json": [1]} @carol';
    const post = roomPost(text, {
      replyTo: '1700000000000-0',
      threadId: '1699999999999-3',
      replyToAgentId: CAROL,
      mentions: [
        { agentId: BOB, agentName: 'bob' },
        { agentId: CAROL, agentName: 'carol' },
      ],
    });
    const { appended, repeated } = await store.notifyPost(post, [{ agentId: CAROL, type: 'reply' }, mention(BOB)]);
    expect(repeated).toEqual([]);
    expect(appended).toEqual([
      { id: expect.stringMatching(/^\d+-\d+$/), type: 'reply', createdAt: expect.any(String), post },
      { id: expect.stringMatching(/^\d+-\d+$/), type: 'mention', createdAt: expect.any(String), post },
    ]);
    for (const notification of appended) expect(notification.createdAt).toBe(new Date(Number(notification.id.split('-')[0])).toISOString());
    const { message: sent } = await store.appendMessage(message('a note'));
    const page = await store.listNotifications(BOB, 10);
    expect(page).toEqual({
      items: [{ id: expect.stringMatching(/^\d+-\d+$/), type: 'direct_message', createdAt: expect.any(String), message: sent }, appended[1]],
      hasMore: false,
      readUpTo: undefined,
      unreadCount: 2,
    });
    expect(compareStreamIds(page.items[0]!.id, appended[1]!.id)).toBeGreaterThan(0);
    expect((await store.listNotifications(CAROL, 10)).items).toEqual([appended[0]]);
    expect(await store.listNotifications(ALICE, 10)).toEqual({ items: [], hasMore: false, readUpTo: undefined, unreadCount: 0 });
  });

  it('pages a feed backwards from a position that stays stable while new notifications arrive', async () => {
    const store = makeStore();
    await mentions(store, 5);
    const first = await store.listNotifications(BOB, 2);
    expect(first.items.map(textOf)).toEqual(['n5', 'n4']);
    expect(first.hasMore).toBe(true);
    await store.appendMessage(message('newer'));
    const second = await store.listNotifications(BOB, 2, { beforeId: first.items.at(-1)?.id });
    expect(second.items.map(textOf)).toEqual(['n3', 'n2']);
    expect(second.hasMore).toBe(true);
    const third = await store.listNotifications(BOB, 2, { beforeId: second.items.at(-1)?.id });
    expect(third.items.map(textOf)).toEqual(['n1']);
    expect(third.hasMore).toBe(false);
  });

  it('lists only those after the read marker when asked, and counts them exactly', async () => {
    const store = makeStore();
    const made = await mentions(store, 5);
    expect(await store.markNotificationsRead(BOB, made[1]!.id)).toEqual({ readUpTo: made[1]!.id, unreadCount: 3 });
    const unread = await store.listNotifications(BOB, 2, { unreadOnly: true });
    expect(unread).toMatchObject({ hasMore: true, readUpTo: made[1]!.id, unreadCount: 3 });
    expect(unread.items.map(textOf)).toEqual(['n5', 'n4']);
    const rest = await store.listNotifications(BOB, 2, { unreadOnly: true, beforeId: unread.items.at(-1)?.id });
    expect(rest.items.map(textOf)).toEqual(['n3']);
    expect(rest.hasMore).toBe(false);
    // The whole feed still holds the read ones, and says where the marker is.
    const all = await store.listNotifications(BOB, 10);
    expect(all).toMatchObject({ hasMore: false, readUpTo: made[1]!.id, unreadCount: 3 });
    expect(all.items.map(textOf)).toEqual(['n5', 'n4', 'n3', 'n2', 'n1']);
    // A direct message is unread like any notification.
    await store.appendMessage(message('dm'));
    const withMessage = await store.listNotifications(BOB, 10, { unreadOnly: true });
    expect(withMessage.items.map(textOf)).toEqual(['dm', 'n5', 'n4', 'n3']);
    expect(withMessage.unreadCount).toBe(4);
    const newest = withMessage.items[0]!;
    expect(await store.markNotificationsRead(BOB, newest.id)).toEqual({ readUpTo: newest.id, unreadCount: 0 });
    expect(await store.listNotifications(BOB, 10, { unreadOnly: true })).toEqual({ items: [], hasMore: false, readUpTo: newest.id, unreadCount: 0 });
  });

  it('never moves the read marker backwards: an older id, or the same, is accepted and changes nothing, even at once', async () => {
    const store = makeStore();
    const made = await mentions(store, 4);
    expect(await store.markNotificationsRead(BOB, made[2]!.id)).toEqual({ readUpTo: made[2]!.id, unreadCount: 1 });
    expect(await store.markNotificationsRead(BOB, made[0]!.id)).toEqual({ readUpTo: made[2]!.id, unreadCount: 1 });
    expect(await store.markNotificationsRead(BOB, made[2]!.id)).toEqual({ readUpTo: made[2]!.id, unreadCount: 1 });
    expect(await store.readMarker(BOB)).toBe(made[2]!.id);
    // Twenty marks at once, newest first: each compares in the same step as it writes, so the newest stays.
    const more = await mentions(store, 20);
    await Promise.all([...more].reverse().map((notification) => store.markNotificationsRead(BOB, notification.id)));
    expect(await store.readMarker(BOB)).toBe(more.at(-1)!.id);
    expect((await store.listNotifications(BOB, 1)).unreadCount).toBe(0);
  });

  it("marks read only an id of a notification in that agent's feed", async () => {
    const store = makeStore();
    const made = await mentions(store, 2);
    const [ms, seq] = made[1]!.id.split('-');
    for (const id of [`${ms}-${Number(seq) + 99}`, '1-0', `0${made[0]!.id}`, `${ms}0-0`]) expect(await store.markNotificationsRead(BOB, id)).toBeUndefined();
    expect(await store.readMarker(BOB)).toBeUndefined();
    // Carol's feed holds none of Bob's notifications.
    expect(await store.markNotificationsRead(CAROL, made[0]!.id)).toBeUndefined();
    expect(await store.readMarker(CAROL)).toBeUndefined();
    expect((await store.listNotifications(BOB, 10)).unreadCount).toBe(2);
  });

  it('caps a feed like an inbox, and counts the unread exactly however the cap trimmed it', async () => {
    const store = makeStore(undefined, 10);
    const made = await mentions(store, 300);
    const kept = await store.notifications(BOB).readAfter('0-0', 1_000);
    // Redis trims whole stream nodes (MAXLEN ~), so it may keep somewhat more than the cap; never fewer.
    expect(kept.length).toBeGreaterThanOrEqual(10);
    expect(kept.length).toBeLessThan(300);
    expect(kept.slice(-10)).toEqual(made.slice(-10));
    expect((await store.listNotifications(BOB, 1)).unreadCount).toBe(kept.length);
    expect(await store.markNotificationsRead(BOB, made[294]!.id)).toEqual({ readUpTo: made[294]!.id, unreadCount: 5 });
    // 300 more: the marked one is trimmed away, so every notification kept is unread.
    await mentions(store, 300);
    const keptNow = await store.notifications(BOB).readAfter('0-0', 1_000);
    expect(keptNow.some((notification) => notification.id === made[294]!.id)).toBe(false);
    const unread = await store.listNotifications(BOB, 50, { unreadOnly: true });
    expect(unread).toMatchObject({ readUpTo: made[294]!.id, unreadCount: keptNow.length });
    expect(unread.items).toEqual(keptNow.slice(-50).reverse());
  });

  it('takes each (agent, post) once: a post handed over again, or an older one, notifies nobody twice', async () => {
    const store = makeStore();
    const [one, two] = [roomPost('one'), roomPost('two')];
    const targets: PostTarget[] = [mention(BOB), { agentId: CAROL, type: 'reply' }];
    expect((await store.notifyPost(two, targets)).appended).toHaveLength(2);
    // The same post again (a notifier stopped after appending, before it stored its position).
    expect(await store.notifyPost(two, targets)).toEqual({ appended: [], repeated: [BOB, CAROL] });
    // An older post was handled before this one for Bob (posts come in order); Alice has none yet.
    const older = await store.notifyPost(one, [mention(BOB), mention(ALICE)]);
    expect(older.repeated).toEqual([BOB]);
    expect(older.appended).toHaveLength(1);
    // Two notifiers handing the same post over at once (a takeover while the old holder still runs): once.
    const three = roomPost('three');
    const both = await Promise.all([store.notifyPost(three, [mention(BOB)]), store.notifyPost(three, [mention(BOB)])]);
    expect(both.flatMap((notified) => notified.appended)).toHaveLength(1);
    // A direct message is no post: the next post still counts.
    await store.appendMessage(message('dm'));
    expect((await store.notifyPost(roomPost('four'), [mention(BOB)])).appended).toHaveLength(1);
    expect((await store.listNotifications(BOB, 10)).items.map(textOf)).toEqual(['four', 'dm', 'three', 'two']);
    expect((await store.listNotifications(CAROL, 10)).items.map(textOf)).toEqual(['two']);
    expect((await store.listNotifications(ALICE, 10)).items.map(textOf)).toEqual(['one']);
  });

  it('orders post ids as Redis does: by time, then sequence, as numbers', async () => {
    const store = makeStore();
    for (const id of ['999-0', '999-7', '1000-0', '1000-9', '1000-10'])
      expect((await store.notifyPost(roomPost(id, { id }), [mention(CAROL)])).appended).toHaveLength(1);
    for (const id of ['1000-9', '999-8', '100-0']) expect((await store.notifyPost(roomPost(id, { id }), [mention(CAROL)])).repeated).toEqual([CAROL]);
    expect((await store.listNotifications(CAROL, 10)).items.map(textOf)).toEqual(['1000-10', '1000-9', '1000-0', '999-7', '999-0']);
  });

  it("appends a message and its direct_message notification together: one each, in the inbox's order, each holding its message", async () => {
    const store = makeStore();
    const inboxWhenTold: boolean[] = [];
    const unsubscribe = await store.notifications(BOB).subscribe((notification) => {
      if (notification.type !== 'direct_message') return;
      void store.listInbox(BOB, 50).then((page) => inboxWhenTold.push(page.items.some((m) => m.id === notification.message.id)));
    });
    const sent = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.appendMessage(message(`at once ${i}`, BOB, i % 2 === 0 ? ALICE : CAROL)).then((s) => s.message)),
    );
    await until(() => inboxWhenTold.length === 20);
    unsubscribe();
    // A follower told of the notification finds the message in the inbox.
    expect(inboxWhenTold).toEqual(Array.from({ length: 20 }, () => true));
    const inbox = (await store.listInbox(BOB, 50)).items;
    const feed = (await store.listNotifications(BOB, 50)).items;
    expect(inbox).toHaveLength(20);
    expect([...inbox].sort((a, b) => compareStreamIds(a.id, b.id))).toEqual([...sent].sort((a, b) => compareStreamIds(a.id, b.id)));
    expect(feed.map((notification) => (notification.type === 'direct_message' ? notification.message : undefined))).toEqual(inbox);
  });

  it('follows a feed after a position: the missed ones, then live ones, in order, nothing twice, posts and messages alike', async () => {
    const store = makeStore();
    const made = await mentions(store, 3);
    const seen: string[] = [];
    const stop = new AbortController();
    let positioned = false;
    const following = followFeed(store.notifications(BOB), made[0]!.id, (n) => seen.push(textOf(n)), stop.signal, { onPositioned: () => (positioned = true) });
    // Written while the replay runs: each must arrive once, after the replayed ones.
    await Promise.all([
      store.notifyPost(roomPost('c1'), [mention(BOB)]),
      store.appendMessage(message('c2')),
      store.notifyPost(roomPost('not mine'), [mention(CAROL)]),
    ]);
    await until(() => seen.length === 4 && positioned);
    await store.notifyPost(roomPost('c3'), [mention(BOB)]);
    await until(() => seen.length === 5);
    stop.abort();
    await following;
    expect(seen).toEqual(['n2', 'n3', 'c1', 'c2', 'c3']);
  });

  it('follows a feed from now on: once positioned, every later notification arrives', async () => {
    const store = makeStore();
    await mentions(store, 1);
    const seen: string[] = [];
    const stop = new AbortController();
    await new Promise<void>((resolve) => {
      void followFeed(store.notifications(BOB), undefined, (n) => seen.push(textOf(n)), stop.signal, { onPositioned: resolve });
    });
    await store.appendMessage(message('new'));
    await until(() => seen.length === 1);
    stop.abort();
    expect(seen).toEqual(['new']);
  });

  it('lets one owner hold the notifier lease at a time; its holder extends it; another takes it once it lapses', async () => {
    const store = makeStore();
    expect(await store.acquireNotifierLease('replica-a', 600)).toBe(true);
    expect(await store.acquireNotifierLease('replica-b', 600)).toBe(false);
    await sleep(400);
    expect(await store.acquireNotifierLease('replica-a', 600)).toBe(true);
    // 800 ms after it was taken: held still, since its holder extended it.
    await sleep(400);
    expect(await store.acquireNotifierLease('replica-b', 600)).toBe(false);
    await sleep(700);
    expect(await store.acquireNotifierLease('replica-b', 600)).toBe(true);
    expect(await store.acquireNotifierLease('replica-a', 600)).toBe(false);
  });

  it('gives the lease up at once when its holder releases it, and only then', async () => {
    const store = makeStore();
    expect(await store.acquireNotifierLease('replica-a', 60_000)).toBe(true);
    await store.releaseNotifierLease('replica-b');
    expect(await store.acquireNotifierLease('replica-b', 60_000)).toBe(false);
    await store.releaseNotifierLease('replica-a');
    expect(await store.acquireNotifierLease('replica-b', 60_000)).toBe(true);
  });

  it("keeps the notifier's position: moved on only by the lease's holder, never backwards", async () => {
    const store = makeStore();
    expect(await store.notifierPosition()).toBeUndefined();
    expect(await store.advanceNotifierPosition('replica-a', '5-0')).toBe(false);
    expect(await store.notifierPosition()).toBeUndefined();
    await store.acquireNotifierLease('replica-a', 60_000);
    // A room without posts: every post comes after 0-0.
    expect(await store.advanceNotifierPosition('replica-a', '0-0')).toBe(true);
    expect(await store.notifierPosition()).toBe('0-0');
    for (const [id, kept] of [
      ['999-0', '999-0'],
      ['1000-0', '1000-0'],
      ['999-7', '1000-0'],
      ['1000-0', '1000-0'],
      ['1000-10', '1000-10'],
      ['1000-9', '1000-10'],
    ] as const) {
      expect(await store.advanceNotifierPosition('replica-a', id)).toBe(true);
      expect(await store.notifierPosition()).toBe(kept);
    }
    expect(await store.advanceNotifierPosition('replica-b', '2000-0')).toBe(false);
    expect(await store.notifierPosition()).toBe('1000-10');
    // Taken over: the old holder moves it no more.
    await store.releaseNotifierLease('replica-a');
    await store.acquireNotifierLease('replica-b', 60_000);
    expect(await store.advanceNotifierPosition('replica-a', '3000-0')).toBe(false);
    expect(await store.advanceNotifierPosition('replica-b', '1000-11')).toBe(true);
    expect(await store.notifierPosition()).toBe('1000-11');
  });
});

describe.each(implementations)('MessagingStore contract, events: %s', (_name, makeStore) => {
  it("appends one event for every notification appended, to any agent's feed, in one global order, carrying the notification as the feed holds it", async () => {
    const store = makeStore();
    const post = roomPost('hello @bob @carol', {
      mentions: [
        { agentId: BOB, agentName: 'bob' },
        { agentId: CAROL, agentName: 'carol' },
      ],
    });
    const { appended } = await store.notifyPost(post, [mention(BOB), mention(CAROL)]);
    const { message: sent } = await store.appendMessage(message('to alice', ALICE, BOB));
    const events = await store.events().readAfter('0-0', 10);
    expect(events).toHaveLength(3);
    for (const event of events) expect(event.id).toMatch(/^\d+-\d+$/);
    expect(events.map((event) => event.id)).toEqual([...events.map((event) => event.id)].sort(compareStreamIds));
    expect(new Set(events.slice(0, 2).map((event) => event.agentId))).toEqual(new Set([BOB, CAROL]));
    expect(
      events
        .slice(0, 2)
        .map((event) => event.notification)
        .sort((a, b) => compareStreamIds(a.id, b.id)),
    ).toEqual([...appended].sort((a, b) => compareStreamIds(a.id, b.id)));
    const [aliceFeed] = (await store.listNotifications(ALICE, 1)).items;
    expect(events[2]).toEqual({ id: events[2]!.id, agentId: ALICE, notification: aliceFeed });
    expect(aliceFeed).toMatchObject({ type: 'direct_message', message: sent });
    // Its own positions: an event id is not the notification's id.
    expect(events.map((event) => event.id)).not.toEqual(events.map((event) => event.notification.id));
  });

  it('adds no event for a post handed over again (no notification appended)', async () => {
    const store = makeStore();
    const post = roomPost('once @bob');
    await store.notifyPost(post, [mention(BOB)]);
    expect((await store.notifyPost(post, [mention(BOB)])).repeated).toEqual([BOB]);
    expect(await store.events().readAfter('0-0', 10)).toHaveLength(1);
  });

  it('reads events after a position, oldest first, at most the count asked', async () => {
    const store = makeStore();
    await mentions(store, 4);
    const all = await store.events().readAfter('0-0', 10);
    expect((await store.events().readAfter(all[0]!.id, 2)).map((event) => textOf(event.notification))).toEqual(['n2', 'n3']);
    expect(await store.events().readAfter(all[3]!.id, 2)).toEqual([]);
  });

  it('follows the events feed after a position: the missed ones, then live ones of every agent, in order, nothing twice', async () => {
    const store = makeStore();
    const made = await mentions(store, 3);
    const first = (await store.events().readAfter('0-0', 1))[0]!;
    expect(first.notification).toEqual(made[0]);
    const seen: string[] = [];
    const stop = new AbortController();
    let positioned = false;
    const following = followFeed(store.events(), first.id, (event) => seen.push(`${event.agentId}:${textOf(event.notification)}`), stop.signal, {
      onPositioned: () => (positioned = true),
    });
    await store.notifyPost(roomPost('c1'), [mention(CAROL)]);
    await store.appendMessage(message('c2', ALICE, BOB));
    await until(() => seen.length === 4 && positioned);
    await store.notifyPost(roomPost('c3'), [mention(BOB)]);
    await until(() => seen.length === 5);
    stop.abort();
    await following;
    expect(seen).toEqual([`${BOB}:n2`, `${BOB}:n3`, `${CAROL}:c1`, `${ALICE}:c2`, `${BOB}:c3`]);
  });

  it('follows the events feed from now on: once positioned, every later notification arrives, and nothing older', async () => {
    const store = makeStore();
    await mentions(store, 2);
    const seen: string[] = [];
    const stop = new AbortController();
    await new Promise<void>((resolve) => {
      void followFeed(store.events(), undefined, (event) => seen.push(textOf(event.notification)), stop.signal, { onPositioned: resolve });
    });
    await store.appendMessage(message('new', CAROL));
    await until(() => seen.length === 1);
    stop.abort();
    expect(seen).toEqual(['new']);
  });
});

describe('RedisMessagingStore', () => {
  it("keeps each inbox under its own {agent id} hash tag and messaging's prefix", async () => {
    const store = track(new RedisMessagingStore(redis, 'keycheck'));
    await store.appendMessage(message('x', BOB));
    await store.appendMessage(message('y', ALICE));
    const keys = (await redis.keys('keycheck:*')).sort();
    // Each recipient's inbox, notification feed and its state share the agent's hash tag: one script writes them.
    expect(keys).toEqual([
      `keycheck:messaging:{${ALICE}}:inbox`,
      `keycheck:messaging:{${ALICE}}:notifications`,
      `keycheck:messaging:{${ALICE}}:notifications:state`,
      `keycheck:messaging:{${BOB}}:inbox`,
      `keycheck:messaging:{${BOB}}:notifications`,
      `keycheck:messaging:{${BOB}}:notifications:state`,
      // The global events feed: its own slot, written right after each notification.
      'keycheck:messaging:{events}:stream',
    ]);
    expect(await redis.type(`keycheck:messaging:{${BOB}}:inbox`)).toBe('stream');
    expect(await redis.type(`keycheck:messaging:{${BOB}}:notifications`)).toBe('stream');
  });

  it('catches a watched inbox up after its subscriber connection drops: nothing missed, nothing twice', async () => {
    const store = track(new RedisMessagingStore(redis, 'reconnect'));
    const seen: string[] = [];
    const stop = new AbortController();
    await new Promise<void>((resolve) => {
      void followFeed(store.inbox(BOB), undefined, (m) => seen.push(m.text), stop.signal, { onPositioned: resolve });
    });
    await store.appendMessage(message('before the drop'));
    await until(() => seen.length === 1);
    // Redis closes the store's subscriber connection; what is sent meanwhile is never published to it.
    const clients = await redis.client('LIST');
    const subscriberId = /id=(\d+) [^\n]*name=messaging-inboxes/.exec(String(clients))?.[1];
    expect(subscriberId).toBeDefined();
    await redis.client('KILL', 'ID', subscriberId ?? '');
    await store.appendMessage(message('while away 1'));
    await store.appendMessage(message('while away 2'));
    await until(() => seen.length === 3);
    await store.appendMessage(message('after the reconnect'));
    await until(() => seen.length === 4);
    await new Promise((resolve) => setTimeout(resolve, 100));
    stop.abort();
    expect(seen).toEqual(['before the drop', 'while away 1', 'while away 2', 'after the reconnect']);
  });

  it('keeps the global events stream under its own {events} hash tag, capped at about the size asked', async () => {
    const prefix = `ev${(prefixes += 1)}`;
    const store = track(new RedisMessagingStore(redis, prefix, undefined, undefined, 100));
    for (let i = 0; i < 300; i += 1) await store.notifyPost(roomPost(`e${i}`), [mention(BOB)]);
    expect(await keysMatching(redis, `${prefix}:messaging:{events}:*`)).toEqual([`${prefix}:messaging:{events}:stream`]);
    const length = await redis.xlen(`${prefix}:messaging:{events}:stream`);
    expect(length).toBeGreaterThanOrEqual(100);
    expect(length).toBeLessThan(300);
  });

  it("keeps the notifier's lease and position under the {notifier} hash tag, so one script reads both on a cluster", async () => {
    const store = track(new RedisMessagingStore(clusterClient, 'notifierkeys'));
    await store.acquireNotifierLease('replica-a', 60_000);
    expect(await store.advanceNotifierPosition('replica-a', '5-0')).toBe(true);
    await store.notifyPost(roomPost('hi'), [mention(CAROL)]);
    expect((await keysMatching(clusterClient, 'notifierkeys:*')).sort()).toEqual([
      `notifierkeys:messaging:{${CAROL}}:notifications`,
      `notifierkeys:messaging:{${CAROL}}:notifications:state`,
      'notifierkeys:messaging:{events}:stream',
      'notifierkeys:messaging:{notifier}:lease',
      'notifierkeys:messaging:{notifier}:position',
    ]);
  });

  it('never lets a reader see a message without its notification, or one without the other, while sends run', async () => {
    const store = track(new RedisMessagingStore(redis, 'together'));
    const [inboxKey, feedKey] = [`together:messaging:{${BOB}}:inbox`, `together:messaging:{${BOB}}:notifications`];
    let sending = true;
    const seen: [number, number][] = [];
    const reading = (async () => {
      while (sending) {
        const replies = await redis.multi().xlen(inboxKey).xlen(feedKey).exec();
        seen.push([Number(replies?.[0]?.[1]), Number(replies?.[1]?.[1])]);
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    for (let i = 0; i < 100; i += 1) await Promise.all([store.appendMessage(message(`a${i}`)), store.appendMessage(message(`b${i}`, BOB, CAROL))]);
    sending = false;
    await reading;
    expect(seen.length).toBeGreaterThan(10);
    expect(seen.filter(([inbox, feed]) => inbox !== feed)).toEqual([]);
    expect([await redis.xlen(inboxKey), await redis.xlen(feedKey)]).toEqual([200, 200]);
  });

  it('catches a watched feed and inbox up after the subscriber connection drops: nothing missed, nothing twice', async () => {
    const store = track(new RedisMessagingStore(redis, 'feedreconnect'));
    const [messages, notifications]: [string[], string[]] = [[], []];
    const stop = new AbortController();
    await Promise.all([
      new Promise<void>((resolve) => void followFeed(store.inbox(BOB), undefined, (m) => messages.push(m.text), stop.signal, { onPositioned: resolve })),
      new Promise<void>(
        (resolve) => void followFeed(store.notifications(BOB), undefined, (n) => notifications.push(textOf(n)), stop.signal, { onPositioned: resolve }),
      ),
    ]);
    await store.appendMessage(message('before'));
    await until(() => notifications.length === 1 && messages.length === 1);
    const clients = await redis.client('LIST');
    const subscriberIds = [...String(clients).matchAll(/id=(\d+) [^\n]*name=messaging-inboxes/g)].map((match) => match[1] ?? '');
    expect(subscriberIds.length).toBeGreaterThan(0);
    for (const id of subscriberIds) await redis.client('KILL', 'ID', id);
    await store.appendMessage(message('while away'));
    await store.notifyPost(roomPost('mentioned while away'), [mention(BOB)]);
    await until(() => notifications.length === 3 && messages.length === 2);
    await store.appendMessage(message('after'));
    await until(() => notifications.length === 4 && messages.length === 3);
    await sleep(100);
    stop.abort();
    expect(notifications).toEqual(['before', 'while away', 'mentioned while away', 'after']);
    expect(messages).toEqual(['before', 'while away', 'after']);
  });
});
