import { MENTIONS_MAX } from '@agentroom/kit/domain';
import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { type Cluster, compareStreamIds, connectRedis, connectRedisCluster, followFeed, type Redis } from '@agentroom/kit/store';
import { type LocalRedisCluster, startRedisCluster } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AgentRecord } from '../src/agents.js';
import type { PostRecord } from '../src/posts.js';
import type { NewPost, RoomStore, RoomStoreOptions } from '../src/store.js';
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

const implementations: [string, (options?: RoomStoreOptions) => RoomStore][] = [
  ['memory', (options) => track(new MemoryRoomStore(undefined, options))],
  ['redis', (options) => track(new RedisRoomStore(redis, `rs${(prefixes += 1)}`, options))],
  ['redis cluster', (options) => track(new RedisRoomStore(clusterClient, `rs${(prefixes += 1)}`, options))],
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

/** appendPost for an author the store is known to keep (and, for a reply, a post it is known to hold). */
async function append(store: RoomStore, text: string, extra: Partial<NewPost> = {}): Promise<PostRecord> {
  const made = await store.appendPost({ ...post(text), ...extra });
  if ('missing' in made) throw new Error(`the store does not keep the ${made.missing} of ${JSON.stringify(text)}`);
  return made.post;
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
    expect(await store.appendPost({ agentId: 'a_nobody001', text: 'from no one', via: 'rest' })).toEqual({ missing: 'agent' });
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

  it('makes one post per call key and agent: a repeat appends nothing and answers the post made, as it is now', async () => {
    const store = await withAuthor(makeStore());
    await store.upsertAgent(agent('a_agent0002', '2026-01-01T00:00:00.000Z', 'other'));
    const first = await store.appendPost({ ...post('once'), callKey: 'key-1' });
    if (!('post' in first)) throw new Error('not appended');
    expect(first.again).toBeUndefined();
    await append(store, 'a reply to it', { replyTo: first.post.id });
    const again = await store.appendPost({ ...post('once'), callKey: 'key-1' });
    expect(again).toEqual({ post: { ...first.post, replyCount: 1 }, again: true });
    // The same key from another agent, and another key, are other posts; so is a post without a key, each time.
    const other = await store.appendPost({ agentId: 'a_agent0002', text: 'once', via: 'rest', callKey: 'key-1' });
    expect('post' in other && other.post.id).not.toBe(first.post.id);
    await store.appendPost({ ...post('once'), callKey: 'key-2' });
    await append(store, 'once');
    await append(store, 'once');
    expect((await store.listPosts(10)).items.filter((p) => p.text === 'once')).toHaveLength(5);
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

  it('leaves posts in the store while a watcher has no room, and delivers them from there once it has, each once', async () => {
    const store = await withAuthor(makeStore());
    const seen: string[] = [];
    let room = 3;
    let drain: (() => void) | undefined;
    const stop = new AbortController();
    let positioned: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => (positioned = resolve));
    const following = followFeed(
      store,
      undefined,
      (p) => {
        seen.push(p.text);
        room -= 1;
        return room > 0;
      },
      stop.signal,
      { onPositioned: () => positioned(), drained: () => new Promise<void>((resolve) => (drain = resolve)) },
    );
    await ready;
    for (let i = 1; i <= 8; i += 1) await append(store, `p${i}`);
    // Full after three: the five others stay in the store, nothing is handed over meanwhile.
    await until(() => drain !== undefined);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(seen).toEqual(['p1', 'p2', 'p3']);
    room = 100;
    drain?.();
    await until(() => seen.length === 8);
    await append(store, 'p9');
    await until(() => seen.length === 9);
    stop.abort();
    await following;
    expect(seen).toEqual(['p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7', 'p8', 'p9']);
  });

  it('catches a watcher with little room up from one read of the store: what a page held past the full watcher is kept for it', async () => {
    const store = await withAuthor(makeStore());
    const made: PostRecord[] = [];
    for (let i = 1; i <= 50; i += 1) made.push(await append(store, `q${i}`));
    // Every post the store answers to the feed, counted.
    let read = 0;
    const source = {
      readAfter: async (afterId: string, count: number) => {
        const page = await store.readAfter(afterId, count);
        read += page.length;
        return page;
      },
      subscribe: (listener: (post: PostRecord) => void) => store.subscribe(listener),
    };
    const seen: string[] = [];
    let room = 5;
    let drain: (() => void) | undefined;
    const stop = new AbortController();
    // Room for five posts at a time, as a gRPC stream whose buffer fills.
    const following = followFeed(
      source,
      made[0]!.id,
      (p) => {
        seen.push(p.text);
        room -= 1;
        return room > 0;
      },
      stop.signal,
      {
        drained: () =>
          new Promise<void>((resolve) => {
            drain = () => {
              room = 5;
              resolve();
            };
          }),
      },
    );
    while (seen.length < 49) {
      await until(() => drain !== undefined);
      const next = drain!;
      drain = undefined;
      next();
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    stop.abort();
    drain?.();
    await following;
    expect(seen).toEqual(made.slice(1).map((p) => p.text));
    expect(read).toBe(49);
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

/** Keeps an agent named `name` (active unless `revokedAt`), created at a time derived from its id. */
async function keep(store: RoomStore, id: string, name: string, revokedAt?: string): Promise<void> {
  await store.upsertAgent({ ...agent(id, '2026-01-02T00:00:00.000Z', name), ...(revokedAt === undefined ? {} : { revokedAt }) });
}

/** Whom a post of `text` mentions, by name, as the store resolves it now. */
async function mentioned(store: RoomStore, text: string): Promise<string[]> {
  return (await append(store, text)).mentions.map((mention) => mention.agentName);
}

describe.each(implementations)('RoomStore contract, replies and threads: %s', (_name, makeStore) => {
  it("makes a reply to a post start that post's thread, and a reply to a reply join it: threads are flat", async () => {
    const store = await withAuthor(makeStore());
    const root = await append(store, 'root');
    const first = await append(store, 'first reply', { replyTo: root.id });
    expect(first).toMatchObject({ replyTo: root.id, threadId: root.id, text: 'first reply', agentName: 'scout' });
    expect(first.replyCount).toBeUndefined();
    await keep(store, 'a_helper0001', 'helper');
    const nested = await append(store, 'reply to the reply', { replyTo: first.id, agentId: 'a_helper0001' });
    expect(nested).toMatchObject({ replyTo: first.id, threadId: root.id });

    // The newest-first list holds every post, replies included, each with its reply fields; the
    // count of the thread's first post is the one of now.
    const listed = (await store.listPosts(10)).items;
    expect(listed.map((p) => [p.text, p.replyTo, p.threadId, p.replyCount])).toEqual([
      ['reply to the reply', first.id, root.id, undefined],
      ['first reply', root.id, root.id, undefined],
      ['root', undefined, undefined, 2],
    ]);
    expect(await store.getPost(root.id)).toEqual({ ...root, replyCount: 2 });
    expect(await store.getPost(first.id)).toEqual(first);
    const third = await append(store, 'third', { replyTo: nested.id });
    // Each reply names the author of the post it answers, as made, listed, read and followed.
    const readBack = [(await store.listPosts(1)).items[0], await store.getPost(third.id), (await store.readAfter(nested.id, 1))[0]];
    expect([root, first, nested, third, ...readBack].map((p) => p?.replyToAgentId)).toEqual([
      undefined,
      'a_agent0001',
      'a_agent0001',
      'a_helper0001',
      'a_helper0001',
      'a_helper0001',
      'a_helper0001',
    ]);
    expect((await store.getPost(root.id))?.replyCount).toBe(3);
    expect((await store.listPosts(1, first.id)).items[0]).toMatchObject({ id: root.id, replyCount: 3 });
  });

  it('answers no post for an id it does not hold, well formed or not', async () => {
    const store = await withAuthor(makeStore());
    const made = await append(store, 'here');
    expect(await store.getPost(made.id)).toEqual(made);
    for (const id of ['1-0', `${made.id.split('-')[0]}-99`, `0${made.id}`, 'nope', '', '1-0 extra']) {
      expect(await store.getPost(id)).toBeUndefined();
      expect(await store.listReplies(id, 10)).toBeUndefined();
    }
  });

  it('lists the replies of a thread oldest first, a page at a time, while more arrive', async () => {
    const store = await withAuthor(makeStore());
    const root = await append(store, 'root');
    const other = await append(store, 'another thread');
    const replies: PostRecord[] = [];
    for (let i = 1; i <= 5; i += 1) {
      replies.push(await append(store, `r${i}`, { replyTo: i === 1 ? root.id : replies[i - 2]!.id }));
      await append(store, `elsewhere ${i}`, { replyTo: other.id });
    }
    const first = await store.listReplies(root.id, 2);
    expect(first?.items.map((p) => p.text)).toEqual(['r1', 'r2']);
    expect(first?.hasMore).toBe(true);
    expect(first?.items[1]).toEqual(replies[1]);
    await append(store, 'r6', { replyTo: root.id });
    const second = await store.listReplies(root.id, 2, first?.items.at(-1)?.id);
    expect(second?.items.map((p) => p.text)).toEqual(['r3', 'r4']);
    expect(second?.hasMore).toBe(true);
    const third = await store.listReplies(root.id, 2, second?.items.at(-1)?.id);
    expect(third?.items.map((p) => p.text)).toEqual(['r5', 'r6']);
    expect(third?.hasMore).toBe(false);
    const all = await store.listReplies(root.id, 50);
    expect(all?.items.slice(0, 5)).toEqual(replies);
    expect(all?.items).toHaveLength(6);
    expect(all?.hasMore).toBe(false);
    expect((await store.listReplies(other.id, 50))?.items.map((p) => p.text)).toEqual([
      'elsewhere 1',
      'elsewhere 2',
      'elsewhere 3',
      'elsewhere 4',
      'elsewhere 5',
    ]);
  });

  it("answers an empty page for a reply's own thread, and for a post nobody answered", async () => {
    const store = await withAuthor(makeStore());
    const root = await append(store, 'root');
    const alone = await append(store, 'alone');
    const reply = await append(store, 'reply', { replyTo: root.id });
    await append(store, 'reply to the reply', { replyTo: reply.id });
    expect(await store.listReplies(reply.id, 10)).toEqual({ items: [], hasMore: false });
    expect(await store.listReplies(alone.id, 10)).toEqual({ items: [], hasMore: false });
    expect((await store.getPost(reply.id))?.replyCount).toBeUndefined();
    expect((await store.getPost(alone.id))?.replyCount).toBeUndefined();
  });

  it('appends nothing for a reply to a post it does not hold, and checks the author first', async () => {
    const store = await withAuthor(makeStore());
    const root = await append(store, 'root');
    const [ms] = root.id.split('-');
    for (const replyTo of [`${ms}-77`, '1-0', 'not-an-id', `0${root.id}`]) {
      expect(await store.appendPost({ ...post('lost'), replyTo })).toEqual({ missing: 'reply-to' });
    }
    expect(await store.appendPost({ agentId: 'a_nobody001', text: 'lost', via: 'rest', replyTo: `${ms}-77` })).toEqual({ missing: 'agent' });
    expect(await store.appendPost({ agentId: 'a_nobody001', text: 'lost', via: 'rest', replyTo: root.id })).toEqual({ missing: 'agent' });
    expect((await store.listPosts(10)).items).toEqual([root]);
    expect(await store.listReplies(root.id, 10)).toEqual({ items: [], hasMore: false });
    // An empty replyTo is no reply.
    expect(await append(store, 'plain', { replyTo: '' })).not.toHaveProperty('replyTo');
  });

  it('counts and lists once each of 50 replies made at once to one thread', async () => {
    const store = await withAuthor(makeStore());
    const root = await append(store, 'root');
    const firstReply = await append(store, 'first', { replyTo: root.id });
    // Half answer the first post, half answer a reply: all join the one thread.
    const made = await Promise.all(Array.from({ length: 50 }, (_, i) => append(store, `at once ${i}`, { replyTo: i % 2 === 0 ? root.id : firstReply.id })));
    expect(new Set(made.map((p) => p.id)).size).toBe(50);
    expect(made.every((p) => p.threadId === root.id)).toBe(true);
    expect((await store.getPost(root.id))?.replyCount).toBe(51);
    expect((await store.getPost(firstReply.id))?.replyCount).toBeUndefined();
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await store.listReplies(root.id, 7, after);
      if (!page) throw new Error('the thread went missing');
      seen.push(...page.items.map((p) => p.id));
      after = page.items.at(-1)?.id;
      if (!page.hasMore) break;
    }
    const ids = [firstReply.id, ...made.map((p) => p.id)].sort(compareStreamIds);
    expect(seen).toEqual(ids);
  });

  it('follows replies like any post, with their reply fields and mentions', async () => {
    const store = await withAuthor(makeStore());
    const root = await append(store, 'root');
    const seen: PostRecord[] = [];
    const unsubscribe = await store.subscribe((p) => seen.push(p));
    const reply = await append(store, 'hi @scout', { replyTo: root.id });
    await until(() => seen.length === 1);
    unsubscribe();
    expect(seen[0]).toEqual(reply);
    expect(seen[0]).toMatchObject({ replyTo: root.id, threadId: root.id, mentions: [{ agentId: 'a_agent0001', agentName: 'scout' }] });
    expect(await store.readAfter(root.id, 10)).toEqual([reply]);
  });
});

describe.each(implementations)('RoomStore contract, mentions and the name index: %s', (_name, makeStore) => {
  it('mentions an agent by its id while it exists and is not revoked, and keeps the name it had then', async () => {
    const store = await withAuthor(makeStore());
    await keep(store, 'a_helper0001', 'Helper');
    await keep(store, 'a_revoked001', 'Gone', '2026-03-01T00:00:00.000Z');
    const made = await append(store, 'ping @a_helper0001 and @a_revoked001 and @a_unknown001, twice @a_helper0001');
    expect(made.mentions).toEqual([{ agentId: 'a_helper0001', agentName: 'Helper' }]);
    await keep(store, 'a_helper0001', 'Renamed');
    // Kept on the post, not read again.
    expect((await store.getPost(made.id))?.mentions).toEqual([{ agentId: 'a_helper0001', agentName: 'Helper' }]);
    expect((await store.listPosts(1)).items[0]?.mentions).toEqual([{ agentId: 'a_helper0001', agentName: 'Helper' }]);
    expect(await mentioned(store, '@a_helper0001')).toEqual(['Renamed']);
  });

  it('mentions by name the one active agent of that name, whatever the case, in text order, each once', async () => {
    const store = await withAuthor(makeStore());
    await keep(store, 'a_zoe000001', 'Zoë.Bot-2');
    await keep(store, 'a_max000001', 'max_b');
    const made = await append(store, 'Hello @MAX_B, @zoË.bOt-2 and @scout; again @max_b and @a_max000001. @nobody');
    expect(made.mentions).toEqual([
      { agentId: 'a_max000001', agentName: 'max_b' },
      { agentId: 'a_zoe000001', agentName: 'Zoë.Bot-2' },
      { agentId: 'a_agent0001', agentName: 'scout' },
    ]);
    // The whole name, not a part of it; a plain post mentions no one.
    expect(await mentioned(store, '@max @zoë @scouts @Zoë.Bot-2x')).toEqual([]);
    expect(await mentioned(store, 'no one at all')).toEqual([]);
  });

  it('follows renames and revocations in its name index at once', async () => {
    const store = await withAuthor(makeStore());
    await keep(store, 'a_ren000001', 'before');
    expect(await mentioned(store, '@before')).toEqual(['before']);
    await keep(store, 'a_ren000001', 'After');
    expect(await mentioned(store, '@before')).toEqual([]);
    expect(await mentioned(store, '@after')).toEqual(['After']);
    await keep(store, 'a_ren000001', 'After', '2026-03-01T00:00:00.000Z');
    expect(await mentioned(store, '@after @a_ren000001')).toEqual([]);
    // A token granted again: active again, under its name.
    await keep(store, 'a_ren000001', 'After');
    expect(await mentioned(store, '@AFTER')).toEqual(['After']);
  });

  it('mentions nobody by a name two active agents share, until only one of them holds it', async () => {
    const store = await withAuthor(makeStore());
    await keep(store, 'a_twin00001', 'twin');
    await keep(store, 'a_twin00002', 'TWIN');
    expect(await mentioned(store, '@twin')).toEqual([]);
    // Either still mentioned by id.
    expect((await append(store, '@a_twin00002')).mentions).toEqual([{ agentId: 'a_twin00002', agentName: 'TWIN' }]);
    await keep(store, 'a_twin00001', 'twin', '2026-03-01T00:00:00.000Z');
    expect((await append(store, '@Twin')).mentions).toEqual([{ agentId: 'a_twin00002', agentName: 'TWIN' }]);
    await keep(store, 'a_twin00003', 'twin');
    expect(await mentioned(store, '@twin')).toEqual([]);
    await keep(store, 'a_twin00002', 'solo');
    expect((await append(store, '@twin @solo')).mentions).toEqual([
      { agentId: 'a_twin00003', agentName: 'twin' },
      { agentId: 'a_twin00002', agentName: 'solo' },
    ]);
  });

  it('counts at most 20 distinct agents, the first in text order; the rest are plain text', async () => {
    const store = await withAuthor(makeStore());
    const names = Array.from({ length: 25 }, (_, i) => `bot${String(i).padStart(2, '0')}`);
    for (const [i, name] of names.entries()) await keep(store, `a_many${String(i).padStart(6, '0')}`, name);
    // Mentions of nobody do not use up the 20; repeats of someone already mentioned neither.
    const text = ['@ghost1 @ghost2', ...names.map((name) => `@${name} @${name.toUpperCase()}`)].join(' ');
    const made = await append(store, text);
    expect(made.mentions.map((mention) => mention.agentName)).toEqual(names.slice(0, 20));
    expect(made.mentions).toHaveLength(MENTIONS_MAX);
  });
});

describe.each(implementations)('RoomStore contract, retention: %s', (_name, makeStore) => {
  it('keeps the newest posts it is told to, and knows the older ones no more', async () => {
    const store = await withAuthor(makeStore({ postsRetention: 3 }));
    const made: PostRecord[] = [];
    for (let i = 1; i <= 7; i += 1) made.push(await append(store, `p${i}`));
    const page = await store.listPosts(10);
    expect(page.items.map((p) => p.text)).toEqual(['p7', 'p6', 'p5']);
    expect(page.hasMore).toBe(false);
    expect((await store.readAfter('0-0', 10)).map((p) => p.text)).toEqual(['p5', 'p6', 'p7']);
    for (const gone of made.slice(0, 4)) {
      expect(await store.getPost(gone.id)).toBeUndefined();
      expect(await store.listReplies(gone.id, 10)).toBeUndefined();
      expect(await store.appendPost({ ...post('too late'), replyTo: gone.id })).toEqual({ missing: 'reply-to' });
    }
    expect(await store.getPost(made[4]!.id)).toEqual(made[4]);
  });

  it('keeps every post with no retention, or a retention of 0', async () => {
    for (const options of [undefined, { postsRetention: 0 }]) {
      const store = await withAuthor(makeStore(options));
      for (let i = 1; i <= 6; i += 1) await append(store, `p${i}`);
      expect((await store.listPosts(10)).items).toHaveLength(6);
    }
  });

  it('ends a list at the oldest post kept: a position whose post went answers an empty page', async () => {
    const store = await withAuthor(makeStore({ postsRetention: 3 }));
    const made: PostRecord[] = [];
    for (let i = 1; i <= 4; i += 1) made.push(await append(store, `p${i}`));
    const first = await store.listPosts(2);
    expect(first.items.map((p) => p.text)).toEqual(['p4', 'p3']);
    expect(first.hasMore).toBe(true);
    // Two more posts push out p2 and p3 while the reader holds its position (after p3).
    await append(store, 'p5');
    await append(store, 'p6');
    expect(await store.listPosts(2, first.items.at(-1)?.id)).toEqual({ items: [], hasMore: false });
    expect(await store.listPosts(2, made[0]!.id)).toEqual({ items: [], hasMore: false });
    // A position still kept pages on to the oldest post kept, and says there is no more.
    expect(await store.listPosts(5, made[3]!.id)).toEqual({ items: [], hasMore: false });
    const last = await store.listPosts(5, (await store.listPosts(1)).items[0]?.id);
    expect(last.items.map((p) => p.text)).toEqual(['p5', 'p4']);
    expect(last.hasMore).toBe(false);
    // A feed resumed from a post that went starts at the oldest post kept.
    expect((await store.readAfter(made[1]!.id, 10)).map((p) => p.text)).toEqual(['p4', 'p5', 'p6']);
  });

  it('drops a thread with its first post; its replies stay in the list, and a reply to one of them joins no thread that can be read', async () => {
    const store = await withAuthor(makeStore({ postsRetention: 4 }));
    const root = await append(store, 'root');
    const first = await append(store, 'first', { replyTo: root.id });
    const second = await append(store, 'second', { replyTo: first.id });
    expect((await store.getPost(root.id))?.replyCount).toBe(2);
    await append(store, 'plain');
    await append(store, 'pushes the root out');
    expect(await store.getPost(root.id)).toBeUndefined();
    expect(await store.listReplies(root.id, 10)).toBeUndefined();
    expect((await store.listPosts(10)).items.map((p) => [p.text, p.replyTo, p.threadId])).toEqual([
      ['pushes the root out', undefined, undefined],
      ['plain', undefined, undefined],
      ['second', first.id, root.id],
      ['first', root.id, root.id],
    ]);
    const late = await append(store, 'late', { replyTo: second.id });
    expect(late).toMatchObject({ replyTo: second.id, threadId: root.id, replyToAgentId: 'a_agent0001' });
    expect(await store.listReplies(root.id, 10)).toBeUndefined();
    expect(await store.getPost(root.id)).toBeUndefined();
    // A thread whose first post is kept is whole: its replies are newer than it.
    const kept = await append(store, 'kept root');
    const answer = await append(store, 'answer', { replyTo: kept.id });
    expect((await store.listReplies(kept.id, 10))?.items).toEqual([answer]);
    expect((await store.getPost(kept.id))?.replyCount).toBe(1);
  });

  it('keeps its bound under concurrent appends', async () => {
    const store = await withAuthor(makeStore({ postsRetention: 10 }));
    await Promise.all(Array.from({ length: 40 }, (_, i) => append(store, `at once ${i}`)));
    const all = await store.readAfter('0-0', 100);
    expect(all).toHaveLength(10);
    const listed = await store.listPosts(50);
    expect(listed.items.map((p) => p.id)).toEqual(all.map((p) => p.id).reverse());
    expect(listed.hasMore).toBe(false);
  });
});

describe.each(implementations)('RoomStore contract, removal: %s', (_name, makeStore) => {
  const AT = '2026-03-01T12:00:00.000Z';

  it('answers a removed post as a tombstone on every read, in its place, its thread and its counts', async () => {
    const store = await withAuthor(makeStore());
    await store.upsertAgent(agent('a_agent0002', '2026-01-01T00:00:00.000Z', 'atlas'));
    const root = await append(store, 'the thread starts here');
    const removed = await append(store, 'a reply that breaks the rules, @atlas', { replyTo: root.id });
    const kept = await append(store, 'a reply that stays', { replyTo: removed.id });
    const before = await store.listPosts(10);
    const tombstone = await store.removePost(removed.id, 'moderator', AT);
    const removal = { postId: removed.id, by: 'moderator', removedAt: AT };
    expect(tombstone).toEqual({ ...removed, text: '', mentions: [], removal });
    // The same place in the list, the same cursor positions, the same counts; only its words are gone.
    const after = await store.listPosts(10);
    expect(after.items.map((p) => p.id)).toEqual(before.items.map((p) => p.id));
    expect(after.items[1]).toEqual(tombstone);
    expect(after.items[2]?.replyCount).toBe(2);
    expect(await store.getPost(removed.id)).toEqual(tombstone);
    expect((await store.listPosts(1, kept.id)).items).toEqual([tombstone]);
    const thread = await store.listReplies(root.id, 10);
    expect(thread?.items.map((p) => p.text)).toEqual(['', 'a reply that stays']);
    expect(thread?.items[0]).toEqual(tombstone);
    expect((await store.listReplies(root.id, 10, removed.id))?.items.map((p) => p.id)).toEqual([kept.id]);
    expect(await store.readAfter(root.id, 10)).toEqual([tombstone, kept]);
    // A reply to a removed post still joins its thread: its place stays.
    const late = await append(store, 'an answer to the tombstone', { replyTo: removed.id });
    expect(late.threadId).toBe(root.id);
  });

  it('answers the same tombstone when a post is removed again, and no post for an id it does not hold', async () => {
    const store = await withAuthor(makeStore());
    const made = await append(store, 'twice');
    const first = await store.removePost(made.id, 'human', AT);
    const again = await store.removePost(made.id, 'moderator', '2026-03-02T00:00:00.000Z');
    expect(again).toEqual(first);
    expect(again?.removal).toEqual({ postId: made.id, by: 'human', removedAt: AT });
    expect(await store.removePost('1-0', 'moderator', AT)).toBeUndefined();
    expect(await store.removePost('not-an-id', 'moderator', AT)).toBeUndefined();
  });

  it("answers a call key's repeat with the tombstone, and appends nothing again", async () => {
    const store = await withAuthor(makeStore());
    const first = await store.appendPost({ ...post('said once'), callKey: 'key-r' });
    if (!('post' in first)) throw new Error('not appended');
    await store.removePost(first.post.id, 'moderator', AT);
    const again = await store.appendPost({ ...post('said once'), callKey: 'key-r' });
    expect(again).toEqual({ post: { ...first.post, text: '', mentions: [], removal: { postId: first.post.id, by: 'moderator', removedAt: AT } }, again: true });
    expect((await store.listPosts(10)).items).toHaveLength(1);
  });

  it('tells every removal listener, of every store on the same storage, once per post', async () => {
    const store = await withAuthor(makeStore());
    const made = await append(store, 'heard of');
    const heard: unknown[] = [];
    const stop = await store.subscribeRemovals((removal) => heard.push(removal));
    await store.removePost(made.id, 'moderator', AT);
    await store.removePost(made.id, 'moderator', AT);
    await until(() => heard.length >= 1);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(heard).toEqual([{ postId: made.id, by: 'moderator', removedAt: AT }]);
    stop();
    const other = await append(store, 'not heard of');
    await store.removePost(other.id, 'human', AT);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(heard).toHaveLength(1);
  });

  it('replays tombstones to a feed resumed from before them; live removals are told apart from posts', async () => {
    const store = await withAuthor(makeStore());
    const anchor = await append(store, 'anchor');
    const gone = await append(store, 'gone before the watcher came back');
    await store.removePost(gone.id, 'moderator', AT);
    const seen: PostRecord[] = [];
    const stop = new AbortController();
    const following = followFeed(store, anchor.id, (p) => seen.push(p), stop.signal);
    await until(() => seen.length === 1);
    stop.abort();
    await following;
    expect(seen[0]).toMatchObject({ id: gone.id, text: '', mentions: [], removal: { postId: gone.id, by: 'moderator' } });
  });
});

describe('RedisRoomStore removal across processes', () => {
  it("tells one store's removals to another's listeners, and erases nothing of the stream's order", async () => {
    const prefix = `rs${(prefixes += 1)}`;
    const [one, two] = [track(new RedisRoomStore(redis, prefix)), track(new RedisRoomStore(redis, prefix))];
    await withAuthor(one);
    const made = await append(one, 'seen by both');
    const heard: unknown[] = [];
    await two.subscribeRemovals((removal) => heard.push(removal));
    await one.removePost(made.id, 'moderator', '2026-03-01T00:00:00.000Z');
    await until(() => heard.length === 1);
    expect((await two.getPost(made.id))?.text).toBe('');
  });
});

describe('RedisRoomStore name index of agents kept before it existed', () => {
  it('indexes them once, and leaves alone those an upsert has indexed since', async () => {
    const prefix = `backfill${(prefixes += 1)}`;
    const store = track(new RedisRoomStore(redis, prefix));
    const agentsKey = `${prefix}:room:{main}:agents`;
    // Written as the store did before mentions: a record without a name index entry.
    const old = (id: string, name: string, revokedAt?: string): string =>
      JSON.stringify({ ...agent(id, '2026-01-01T00:00:00.000Z', name), ...(revokedAt ? { revokedAt } : {}) });
    await redis.hset(agentsKey, 'a_agent0001', old('a_agent0001', 'scout'));
    await redis.hset(agentsKey, 'a_oldrev001', old('a_oldrev001', 'revoked', '2026-02-01T00:00:00.000Z'));
    await redis.hset(agentsKey, 'a_oldren001', old('a_oldren001', 'oldname'));
    expect(await mentioned(store, '@scout @oldname')).toEqual([]);
    // Renamed through the store before the index was built: indexed by that upsert.
    await store.upsertAgent(agent('a_oldren001', '2026-01-01T00:00:00.000Z', 'newname'));
    expect(await store.indexExistingAgentNames()).toBe(1);
    expect(await mentioned(store, '@scout @revoked @oldname @newname')).toEqual(['scout', 'newname']);
    await redis.hset(agentsKey, 'a_later0001', old('a_later0001', 'later'));
    expect(await store.indexExistingAgentNames()).toBe(0);
    expect(await mentioned(store, '@later')).toEqual([]);
  });

  it('does not index an agent that an upsert revokes while it runs', async () => {
    const prefix = `backfill${(prefixes += 1)}`;
    const store = track(new RedisRoomStore(redis, prefix));
    await withAuthor(store);
    await redis.hset(`${prefix}:room:{main}:agents`, 'a_racer0001', JSON.stringify(agent('a_racer0001', '2026-01-01T00:00:00.000Z', 'racer')));
    // The revocation lands between the read of the record and the script that indexes it.
    const scan = redis.hscan.bind(redis) as (...args: unknown[]) => Promise<[string, string[]]>;
    const spy = vi.spyOn(redis, 'hscan').mockImplementationOnce((async (...args: unknown[]) => {
      const read = await scan(...args);
      await store.upsertAgent({ ...agent('a_racer0001', '2026-01-01T00:00:00.000Z', 'racer'), revokedAt: '2026-03-01T00:00:00.000Z' });
      return read;
    }) as typeof redis.hscan);
    try {
      expect(await store.indexExistingAgentNames()).toBe(0);
    } finally {
      spy.mockRestore();
    }
    expect(await mentioned(store, '@racer @scout')).toEqual(['scout']);
  });
});

describe('RedisRoomStore keys', () => {
  it('keeps every room key under the {main} hash tag and its own prefix', async () => {
    const store = track(new RedisRoomStore(redis, 'keycheck'));
    await append(await withAuthor(store), 'x');
    const keys = (await redis.keys('keycheck:*')).sort();
    expect(keys).toEqual([
      'keycheck:room:{main}:agents',
      'keycheck:room:{main}:agents:by-name',
      'keycheck:room:{main}:agents:by-time',
      'keycheck:room:{main}:agents:name-keys',
      'keycheck:room:{main}:posts',
    ]);
    expect(await redis.type('keycheck:room:{main}:posts')).toBe('stream');
  });

  it('keeps the thread index, reply counts and name index under the same hash tag, so one script writes them on a cluster', async () => {
    const store = await withAuthor(track(new RedisRoomStore(redis, 'threadcheck')));
    const root = await append(store, 'root');
    await append(store, 'reply @scout', { replyTo: root.id });
    const keys = (await redis.keys('threadcheck:*')).sort();
    expect(keys).toEqual([
      'threadcheck:room:{main}:agents',
      'threadcheck:room:{main}:agents:by-name',
      'threadcheck:room:{main}:agents:by-time',
      'threadcheck:room:{main}:agents:name-keys',
      'threadcheck:room:{main}:posts',
      'threadcheck:room:{main}:posts:reply-counts',
      `threadcheck:room:{main}:posts:thread:${root.id}`,
      'threadcheck:room:{main}:posts:threads',
    ]);
    expect(await redis.type(`threadcheck:room:{main}:posts:thread:${root.id}`)).toBe('stream');
    expect(new Set(await Promise.all(keys.map((key) => clusterClient.cluster('KEYSLOT', key))))).toHaveLength(1);
  });

  it('drops the keys of a thread once the retention takes its first post', async () => {
    const store = await withAuthor(track(new RedisRoomStore(redis, 'trimcheck', { postsRetention: 4 })));
    const root = await append(store, 'root');
    const other = await append(store, 'other root');
    await append(store, 'reply', { replyTo: root.id });
    await append(store, 'reply', { replyTo: other.id });
    expect(await redis.exists(`trimcheck:room:{main}:posts:thread:${root.id}`, `trimcheck:room:{main}:posts:thread:${other.id}`)).toBe(2);
    await append(store, 'pushes the first root out');
    expect(await redis.exists(`trimcheck:room:{main}:posts:thread:${root.id}`, `trimcheck:room:{main}:posts:thread:${other.id}`)).toBe(1);
    await append(store, 'and the second');
    expect(await redis.xlen('trimcheck:room:{main}:posts')).toBe(4);
    expect(await redis.exists(`trimcheck:room:{main}:posts:thread:${root.id}`, `trimcheck:room:{main}:posts:thread:${other.id}`)).toBe(0);
    expect(await redis.hlen('trimcheck:room:{main}:posts:reply-counts')).toBe(0);
    expect(await redis.zcard('trimcheck:room:{main}:posts:threads')).toBe(0);
  });
});
