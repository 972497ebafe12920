import { type Cluster, connectRedis, connectRedisCluster, followFeed, type LocalRedis, type LocalRedisCluster, type Redis, startRedisCluster, startRedisServer } from '@agentroom/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentRecord } from '../src/agents.js';
import type { PostRecord } from '../src/posts.js';
import type { NewPost, RoomStore } from '../src/store.js';
import { MemoryRoomStore } from '../src/store-memory.js';
import { RedisRoomStore } from '../src/store-redis.js';

let redisServer: LocalRedis;
let redis: Redis;
/** One three-master Redis Cluster for the whole file: it takes about two seconds to start. */
let cluster: LocalRedisCluster;
let clusterClient: Cluster;
let prefixes = 0;
const opened: RoomStore[] = [];

beforeAll(async () => {
  [redisServer, cluster] = await Promise.all([startRedisServer(), startRedisCluster()]);
  redis = connectRedis(redisServer.url, 'room-store-test');
  clusterClient = connectRedisCluster(cluster.nodes, 'room-store-test');
});

afterAll(async () => {
  for (const store of opened) await store.close();
  await redis.quit();
  await redisServer.stop();
  await clusterClient.quit();
  await cluster.stop();
});

function track<T extends RoomStore>(store: T): T {
  opened.push(store);
  return store;
}

const implementations: [string, () => RoomStore][] = [
  ['memory', () => track(new MemoryRoomStore())],
  ['redis', () => track(new RedisRoomStore(redis, `rs${(prefixes += 1)}`))],
  ['redis cluster', () => track(new RedisRoomStore(clusterClient, `rs${(prefixes += 1)}`))],
];

function post(text: string): NewPost {
  return { agentId: 'a_agent0001', text, via: 'rest' };
}

function agent(id: string, createdAt: string, name = 'scout'): AgentRecord {
  return { id, agentName: name, humanLabel: 'Ada', scopes: ['posts:write'], createdAt };
}

/** A store that keeps the agent `post()` writes as: scout, of Ada. */
async function withAuthor(store: RoomStore): Promise<RoomStore> {
  await store.upsertAgent(agent('a_agent0001', '2026-01-01T00:00:00.000Z'));
  return store;
}

/** appendPost for an author the store is known to keep. */
async function append(store: RoomStore, text: string): Promise<PostRecord> {
  const made = await store.appendPost(post(text));
  if (!made) throw new Error('the store does not keep the author a_agent0001');
  return made;
}

async function until(condition: () => boolean, ms = 3_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.each(implementations)('RoomStore contract: %s', (_name, makeStore) => {
  it('appends posts with stream ids and lists them newest first', async () => {
    const store = await withAuthor(makeStore());
    const a = await append(store, 'first');
    const b = await append(store, 'second');
    expect(a.id).toMatch(/^\d+-\d+$/);
    expect(a.createdAt).toBe(new Date(Number(a.id.split('-')[0])).toISOString());
    expect(b).toMatchObject({ agentName: 'scout', humanLabel: 'Ada', text: 'second', via: 'rest' });
    const page = await store.listPosts(10);
    expect(page.items.map((p) => p.text)).toEqual(['second', 'first']);
    expect(page.hasMore).toBe(false);
  });

  it("writes each post with its author's name and label as their record holds them then, and nothing for an agent it does not keep", async () => {
    const store = makeStore();
    expect(await store.appendPost({ agentId: 'a_nobody001', text: 'from no one', via: 'rest' })).toBeUndefined();
    expect((await store.listPosts(10)).items).toEqual([]);
    await withAuthor(store);
    expect(await append(store, 'one')).toMatchObject({ agentId: 'a_agent0001', agentName: 'scout', humanLabel: 'Ada', text: 'one' });
    await store.upsertAgent({ ...agent('a_agent0001', '2026-01-01T00:00:00.000Z', 'renamed'), humanLabel: 'Grace' });
    expect(await append(store, 'two')).toMatchObject({ agentName: 'renamed', humanLabel: 'Grace', text: 'two' });
    // A post keeps the name it was made with.
    expect((await store.listPosts(10)).items.map((p) => [p.text, p.agentName, p.humanLabel])).toEqual([
      ['two', 'renamed', 'Grace'],
      ['one', 'scout', 'Ada'],
    ]);
  });

  it('keeps text exactly, including emoji, newlines and markup', async () => {
    const store = await withAuthor(makeStore());
    const text = '😀 <b>bold</b>\n  "quoted" & done';
    await append(store, text);
    expect((await store.listPosts(1)).items[0]?.text).toBe(text);
  });

  it('pages backwards from a position that stays stable while new posts arrive', async () => {
    const store = await withAuthor(makeStore());
    for (let i = 1; i <= 5; i += 1) await append(store, `p${i}`);
    const first = await store.listPosts(2);
    expect(first.items.map((p) => p.text)).toEqual(['p5', 'p4']);
    expect(first.hasMore).toBe(true);
    await append(store, 'p6');
    const second = await store.listPosts(2, first.items.at(-1)?.id);
    expect(second.items.map((p) => p.text)).toEqual(['p3', 'p2']);
    const third = await store.listPosts(2, second.items.at(-1)?.id);
    expect(third.items.map((p) => p.text)).toEqual(['p1']);
    expect(third.hasMore).toBe(false);
  });

  it('reads after a position, oldest first, at most the count asked', async () => {
    const store = await withAuthor(makeStore());
    const made: PostRecord[] = [];
    for (let i = 1; i <= 4; i += 1) made.push(await append(store, `r${i}`));
    expect((await store.readAfter(made[0]!.id, 2)).map((p) => p.text)).toEqual(['r2', 'r3']);
    expect((await store.readAfter('0-0', 10)).map((p) => p.text)).toEqual(['r1', 'r2', 'r3', 'r4']);
    expect(await store.readAfter(made[3]!.id, 10)).toEqual([]);
  });

  it('tells subscribers of each new post, in order', async () => {
    const store = await withAuthor(makeStore());
    const seen: string[] = [];
    const unsubscribe = await store.subscribe((p) => seen.push(p.text));
    await append(store, 'live1');
    await append(store, 'live2');
    await until(() => seen.length === 2);
    unsubscribe();
    await append(store, 'after');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(seen).toEqual(['live1', 'live2']);
  });

  it('resumes a feed after an id with nothing missed and nothing twice, while posts keep coming', async () => {
    const store = await withAuthor(makeStore());
    const before: PostRecord[] = [];
    for (let i = 1; i <= 3; i += 1) before.push(await append(store, `b${i}`));
    const seen: string[] = [];
    const stop = new AbortController();
    const following = followFeed(store, before[0]!.id, (p) => seen.push(p.text), stop.signal);
    // Posts written while the replay runs must arrive exactly once, after the replayed ones.
    const writes = Promise.all([append(store, 'c1'), append(store, 'c2')]);
    await writes;
    await until(() => seen.length === 4);
    await append(store, 'c3');
    await until(() => seen.length === 5);
    stop.abort();
    await following;
    expect(seen).toEqual(['b2', 'b3', 'c1', 'c2', 'c3']);
  });

  it('creates and replaces agents, keeping the first creation time', async () => {
    const store = makeStore();
    await store.upsertAgent(agent('a_first0001', '2026-01-01T00:00:00.000Z'));
    const replaced = await store.upsertAgent({ ...agent('a_first0001', '2026-06-01T00:00:00.000Z', 'renamed'), scopes: ['posts:write', 'messages:read'] });
    expect(replaced.createdAt).toBe('2026-01-01T00:00:00.000Z');
    expect(await store.getAgent('a_first0001')).toEqual({
      id: 'a_first0001',
      agentName: 'renamed',
      humanLabel: 'Ada',
      scopes: ['posts:write', 'messages:read'],
      createdAt: '2026-01-01T00:00:00.000Z',
    });
    expect(await store.getAgent('a_missing001')).toBeUndefined();
  });

  it('keeps a revoked agent readable, and lists it only when asked; has_more counts what the list shows', async () => {
    const store = makeStore();
    await store.upsertAgent(agent('a_live00001', '2026-01-01T00:00:00.000Z', 'live'));
    await store.upsertAgent({ ...agent('a_gone00001', '2026-02-01T00:00:00.000Z', 'gone'), scopes: [], revokedAt: '2026-03-01T00:00:00.000Z' });
    await store.upsertAgent(agent('a_newer0001', '2026-04-01T00:00:00.000Z', 'newer'));
    expect(await store.getAgent('a_gone00001')).toMatchObject({ agentName: 'gone', revokedAt: '2026-03-01T00:00:00.000Z' });
    expect((await store.listAgents(2)).items.map((a) => a.agentName)).toEqual(['newer', 'live']);
    expect((await store.listAgents(2)).hasMore).toBe(false);
    expect((await store.listAgents(2, true)).items.map((a) => a.agentName)).toEqual(['newer', 'gone']);
    expect((await store.listAgents(2, true)).hasMore).toBe(true);
  });

  it('lists agents most recently created first, with has_more', async () => {
    const store = makeStore();
    await store.upsertAgent(agent('a_old000001', '2026-01-01T00:00:00.000Z', 'old'));
    await store.upsertAgent(agent('a_mid000001', '2026-02-01T00:00:00.000Z', 'mid'));
    await store.upsertAgent(agent('a_new000001', '2026-03-01T00:00:00.000Z', 'new'));
    const page = await store.listAgents(2);
    expect(page.items.map((a) => a.agentName)).toEqual(['new', 'mid']);
    expect(page.hasMore).toBe(true);
    expect((await store.listAgents(3)).hasMore).toBe(false);
  });

  it('answers a ping', async () => {
    await expect(makeStore().ping()).resolves.toBeUndefined();
  });
});

describe('RedisRoomStore keys', () => {
  it('keeps every room key under the {main} hash tag and its own prefix', async () => {
    const store = track(new RedisRoomStore(redis, 'keycheck'));
    await append(await withAuthor(store), 'x');
    const keys = (await redis.keys('keycheck:*')).sort();
    expect(keys).toEqual(['keycheck:room:{main}:agents', 'keycheck:room:{main}:agents:by-time', 'keycheck:room:{main}:posts']);
    expect(await redis.type('keycheck:room:{main}:posts')).toBe('stream');
  });
});
