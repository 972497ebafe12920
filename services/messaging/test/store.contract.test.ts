import { type Cluster, connectRedis, connectRedisCluster, followFeed, type LocalRedis, type LocalRedisCluster, type Redis, startRedisCluster, startRedisServer } from '@agentroom/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MessageRecord } from '../src/messages.js';
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

const implementations: [string, (maxLength?: number) => MessagingStore][] = [
  ['memory', (maxLength) => track(new MemoryMessagingStore(undefined, maxLength))],
  ['redis', (maxLength) => track(new RedisMessagingStore(redis, `ms${(prefixes += 1)}`, maxLength))],
  ['redis cluster', (maxLength) => track(new RedisMessagingStore(clusterClient, `ms${(prefixes += 1)}`, maxLength))],
];

const ALICE = 'a_alice000001';
const BOB = 'a_bob00000001';

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
  it('appends to the recipient\'s inbox with stream ids and lists it newest first', async () => {
    const store = makeStore();
    const a = await store.appendMessage(message('first'));
    const b = await store.appendMessage(message('second'));
    expect(a.id).toMatch(/^\d+-\d+$/);
    expect(a.createdAt).toBe(new Date(Number(a.id.split('-')[0])).toISOString());
    expect(b).toEqual({ id: b.id, fromAgentId: ALICE, fromAgentName: 'alice', toAgentId: BOB, toAgentName: 'bob', text: 'second', via: 'rest', createdAt: b.createdAt });
    const page = await store.listInbox(BOB, 10);
    expect(page.items).toEqual([b, a]);
    expect(page.hasMore).toBe(false);
  });

  it('keeps inboxes apart: a message is only in its recipient\'s inbox', async () => {
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
    for (let i = 1; i <= 4; i += 1) made.push(await store.appendMessage(message(`r${i}`)));
    await store.appendMessage(message('elsewhere', ALICE));
    const inbox = store.inbox(BOB);
    expect((await inbox.readAfter(made[0]!.id, 2)).map((m) => m.text)).toEqual(['r2', 'r3']);
    expect((await inbox.readAfter('0-0', 10)).map((m) => m.text)).toEqual(['r1', 'r2', 'r3', 'r4']);
    expect(await inbox.readAfter(made[3]!.id, 10)).toEqual([]);
  });

  it('tells an inbox\'s subscribers of each new message to it, in order, and of nothing else', async () => {
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
    for (let i = 1; i <= 3; i += 1) before.push(await store.appendMessage(message(`b${i}`)));
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
    for (let i = 1; i <= 300; i += 1) made.push(await store.appendMessage(message(`n${i}`)));
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

describe('RedisMessagingStore', () => {
  it('keeps each inbox under its own {agent id} hash tag and messaging\'s prefix', async () => {
    const store = track(new RedisMessagingStore(redis, 'keycheck'));
    await store.appendMessage(message('x', BOB));
    await store.appendMessage(message('y', ALICE));
    const keys = (await redis.keys('keycheck:*')).sort();
    expect(keys).toEqual([`keycheck:messaging:{${ALICE}}:inbox`, `keycheck:messaging:{${BOB}}:inbox`]);
    expect(await redis.type(`keycheck:messaging:{${BOB}}:inbox`)).toBe('stream');
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
});
