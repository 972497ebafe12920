import { randomUUID } from 'node:crypto';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { LIMIT_MAX, type Scope } from '@agentroom/kit/domain';
import { CLIENT_OPTIONS, HealthChecker, type ServiceClient, serviceClient, unaryCall } from '@agentroom/kit/grpc';
import { newCursorSecret } from '@agentroom/kit/http';
import { freePort } from '@agentroom/kit/local';
import { createLogger } from '@agentroom/kit/log';
import { cursorPageReads, firstPageReads } from '@agentroom/kit/metrics';
import { DomainError } from '@agentroom/kit/problems';
import { MemoryFeedbackStore, MemoryIdempotencyStore, MemoryQuotaStore } from '@agentroom/kit/store';
import { authProto, deliveryProto, messagingProto, roomProto, type RoomServiceClient, type UpsertAgentResponse__Output } from '@agentroom/proto';
import type { Post, PostList } from '@agentroom/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenCache } from '../src/gateways/token-cache.js';
import { FIRST_PAGE_CAPACITY, FirstPage, POSTS_WINDOW, windowFor } from '../src/live/first-page.js';
import type { PagedPost } from '../src/operations/table.js';
import { PostsHub } from '../src/live/posts-hub.js';
import { Core, type Outcome } from '../src/operations/core.js';
import { operationTable } from '../src/operations/table.js';
import { asksNoCache } from '../src/http/answers.js';
import { restSurface } from '../src/rest/surface.js';
import { approveAsHuman, type Backends, coreOver, type CoreUnderTest, startBackends, urls } from './support/services.js';

const rest = restSurface(urls);

function ok<T>(outcome: Outcome<T>): T {
  if (!outcome.ok) throw new Error(`expected success, got ${JSON.stringify(outcome.problem.document)}`);
  return outcome.output;
}

/** How many first-page reads this process counted, by outcome (the metric on edge's /metrics). */
async function reads(outcome: 'hit' | 'miss' | 'bypass'): Promise<number> {
  return (await firstPageReads.get()).values.find((value) => value.labels.outcome === outcome)?.value ?? 0;
}

/** Polls `check` every 10 ms until it holds; throws after `timeoutMs` (a wait, not a measured bound). */
async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('the first page in edge memory, over the real room, auth and messaging processes', () => {
  let backends: Backends;
  let tested: CoreUnderTest;
  let writer: string;
  let made = 0;

  const list = async (limit: number, readThrough = false): Promise<PostList> =>
    ok(await tested.core.invoke(await tested.core.admit({ address: '10.1.0.1' }), 'listPosts', { limit }, { surface: rest, readThrough }));

  const post = async (text: string): Promise<Post> => {
    made += 1;
    return ok(
      await tested.core.invoke(await tested.core.admit({ authorization: `Bearer ${writer}`, address: '10.1.0.2' }), 'createPost', { text }, { surface: rest }),
    );
  };

  /** Until the hub has caught up with every post made so far, and answers from memory. */
  const settled = (): Promise<void> => until('the first page answered from memory', () => tested.hub.newestPage(1) !== undefined);

  beforeAll(async () => {
    backends = await startBackends();
    tested = coreOver(backends, { perToken: 100_000, perAddress: 100_000 });
    const admission = await tested.core.admit({ address: '10.1.0.3' });
    const started = ok(
      await tested.core.invoke(admission, 'startSignup', { scopes: ['posts:write'] satisfies Scope[], agent_name: 'pager' }, { surface: rest }),
    );
    await approveAsHuman(backends.authHttp, started.user_code);
    const polled = ok(
      await tested.core.invoke(await tested.core.admit({ address: '10.1.0.3' }), 'pollSignup', { device_code: started.device_code }, { surface: rest }),
    );
    if (polled.status !== 'completed') throw new Error('the signup is still pending');
    writer = polled.access_token;
  }, 60_000);

  afterAll(async () => {
    tested?.close();
    await backends?.stop();
  });

  it('answers every first page, limit 1 to 50, as the room does, byte for byte, at every room size', async () => {
    for (const size of [0, 1, 2, 49, 50, 51, 52, 130]) {
      while (made < size) await post(`post ${made + 1}`);
      await settled();
      const hits = await reads('hit');
      for (let limit = 1; limit <= LIMIT_MAX; limit += 1) {
        const cached = await list(limit);
        const fresh = await list(limit, true);
        expect(JSON.stringify(cached), `${size} posts, limit ${limit}`).toBe(JSON.stringify(fresh));
        expect(cached.data).toHaveLength(Math.min(limit, size));
        expect(cached.has_more).toBe(size > limit);
      }
      // Every one of those came from memory: the comparison is between the cache and the room.
      expect((await reads('hit')) - hits).toBe(LIMIT_MAX);
    }
    // A cached page's next_cursor pages on at the room, right after its last post.
    const first = await list(50);
    const second = ok(
      await tested.core.invoke(
        await tested.core.admit({ address: '10.1.0.1' }),
        'listPosts',
        { limit: 50, cursor: first.next_cursor ?? '' },
        { surface: rest },
      ),
    );
    expect(second.data.map((p) => p.text)).toEqual(Array.from({ length: 50 }, (_, i) => `post ${80 - i}`));
  });

  it('lists a post on its own edge at once, once, and in id order', async () => {
    for (let i = 0; i < 20; i += 1) {
      const created = await post(`mine ${i}`);
      const page = await list(5);
      expect(page.data[0]?.id).toBe(created.id);
    }
    await settled();
    const page = await list(50);
    const ids = page.data.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(page.data.slice(0, 20).map((p) => p.text)).toEqual(Array.from({ length: 20 }, (_, i) => `mine ${19 - i}`));
    expect(JSON.stringify(page)).toBe(JSON.stringify(await list(50, true)));
  });

  it("puts a removed post's tombstone in its place in memory, as the room answers it, and tells live subscribers", async () => {
    const target = await post('words a moderator removes');
    await post('a post after it');
    await settled();
    const heard: unknown[] = [];
    const stop = await tested.hub.subscribe(
      undefined,
      () => undefined,
      () => undefined,
      (removal) => heard.push(removal),
    );
    const { post: tombstone } = await tested.room.call('removePost', { postId: target.id, by: 'moderator' });
    await until('the tombstone on the first page', () => tested.hub.newestPage(5)?.data.find((p) => p.id === target.id)?.removed !== undefined);
    const hits = await reads('hit');
    const cached = await list(50);
    expect((await reads('hit')) - hits).toBe(1);
    expect(cached.data.find((p) => p.id === target.id)).toEqual({
      ...target,
      text: '',
      removed: { by: 'moderator', removedAt: tombstone?.removal?.removedAt },
    });
    expect(JSON.stringify(cached)).toBe(JSON.stringify(await list(50, true)));
    expect(heard).toEqual([{ id: target.id, removed: { by: 'moderator', removedAt: tombstone?.removal?.removedAt } }]);
    stop();
  });

  it('reads through to the room with Cache-Control: no-cache, counted apart', async () => {
    await settled();
    const [hits, bypasses] = [await reads('hit'), await reads('bypass')];
    await list(10, true);
    expect([(await reads('hit')) - hits, (await reads('bypass')) - bypasses]).toEqual([0, 1]);
  });
});

describe('Cache-Control: no-cache', () => {
  it('is read from the request header among other directives, in any case', () => {
    expect(asksNoCache('no-cache')).toBe(true);
    expect(asksNoCache('max-age=0, No-Cache')).toBe(true);
    expect(asksNoCache(['public', 'no-cache="set-cookie"'])).toBe(true);
    expect(asksNoCache(undefined)).toBe(false);
    expect(asksNoCache('no-store, max-age=0')).toBe(false);
    expect(asksNoCache('nocache')).toBe(false);
  });
});

describe('FirstPage: posts from the stream and from this edge, out of order', () => {
  const entry = (ms: number, text = `at ${ms}`): PagedPost => ({
    post: { id: `${ms}-0`, agentId: 'a_1', agentName: 'a', humanLabel: 'H', text, via: 'rest', createdAt: new Date(ms).toISOString() },
    cursor: `after-${ms}`,
  });

  it('replaces a held post with its tombstone once, in a new object: pages answered before keep theirs', () => {
    const page = new FirstPage(5);
    page.seed([entry(20), entry(10)], false);
    page.positioned('20-0');
    const before = page.page(5);
    const removed = { by: 'human', removedAt: '2026-03-01T12:00:00.000Z' } as const;
    page.removed('10-0', removed);
    expect(page.page(5)?.data.map((p) => [p.id, p.text, p.removed])).toEqual([
      ['20-0', 'at 20', undefined],
      ['10-0', '', removed],
    ]);
    expect(before?.data[1]?.text).toBe('at 10');
    // Again, or a post it does not hold: nothing changes.
    const after = page.page(5);
    page.removed('10-0', { by: 'moderator', removedAt: '2026-03-02T00:00:00.000Z' });
    page.removed('15-0', removed);
    expect(page.page(5)).toBe(after);
  });

  it('holds back while its own post is ahead of the stream, and keeps each post once', () => {
    const page = new FirstPage(5);
    expect(page.page(1)).toBeUndefined();
    page.seed([entry(20), entry(10)], false);
    expect(page.page(1)).toBeUndefined(); // seeded, but the stream is not positioned yet
    page.positioned('20-0');
    expect(page.page(5)).toMatchObject({ data: [{ id: '20-0' }, { id: '10-0' }], has_more: false, next_cursor: null });
    expect(page.page(1)).toMatchObject({ data: [{ id: '20-0' }], has_more: true, next_cursor: 'after-20' });
    // This edge made 40; another edge's 30 is still on its way: no page until the stream has both.
    page.created(entry(40));
    expect(page.page(5)).toBeUndefined();
    page.streamed(entry(30));
    expect(page.page(5)).toBeUndefined();
    page.streamed(entry(40, 'from the stream'));
    expect(page.page(5)?.data.map((p) => [p.id, p.text])).toEqual([
      ['40-0', 'at 40'],
      ['30-0', 'at 30'],
      ['20-0', 'at 20'],
      ['10-0', 'at 10'],
    ]);
    // Past its capacity it keeps the newest, and knows older ones exist.
    page.streamed(entry(50));
    page.streamed(entry(60));
    expect(page.page(4)).toMatchObject({ has_more: true, next_cursor: 'after-30' });
    expect(page.page(5)).toMatchObject({
      data: [{ id: '60-0' }, { id: '50-0' }, { id: '40-0' }, { id: '30-0' }, { id: '20-0' }],
      has_more: true,
      next_cursor: 'after-20',
    });
    expect(page.page(6)).toBeUndefined();
    page.reset();
    expect(page.page(1)).toBeUndefined();
  });
});

// ---- a room that goes away and comes back -------------------------------------------------------

const ROOM_SCRIPT = fileURLToPath(new URL('../../room/dist/main.js', import.meta.url));

interface RoomProcess {
  child: ChildProcess;
  /** How many ListPosts calls it answered, from its own /metrics. */
  listPostsServed(): Promise<number>;
  stop(): Promise<void>;
}

/** The room service as its own process (memory storage) at a fixed address, so it can come back there. */
async function startRoom(address: string, env: Record<string, string> = {}): Promise<RoomProcess> {
  const admin = await freePort();
  const child = spawn(process.execPath, [ROOM_SCRIPT], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'silent', ROOM_GRPC_ADDR: address, ADMIN_PORT: String(admin), CURSOR_SECRET: newCursorSecret(), ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = once(child, 'exit');
  const health = new HealthChecker(address);
  try {
    await until('the room serving', async () => (await health.check()) === 'SERVING', 20_000);
  } finally {
    health.close();
  }
  return {
    child,
    async listPostsServed() {
      const text = await (await fetch(`http://127.0.0.1:${admin}/metrics`)).text();
      const line = text
        .split('\n')
        .find((row) => row.startsWith('agentroom_grpc_server_handled_seconds_count{') && row.includes('method="ListPosts"') && row.includes('code="OK"'));
      return line === undefined ? 0 : Number(line.split(' ').at(-1));
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** An agent and its posts, put in the room over its gRPC API. */
async function agentIn(address: string): Promise<string> {
  const client = new (roomProto().RoomService)(address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  try {
    const made = await unaryCall<UpsertAgentResponse__Output>(2_000, (metadata, options, callback) =>
      client.upsertAgent({ agent: { agentName: 'restarter', humanLabel: 'Ada', scopes: ['posts:write'] } }, metadata, options, callback),
    );
    return made.agent?.id ?? '';
  } finally {
    client.close();
  }
}

describe('the first page when the room stream is lost, and when it is back', () => {
  let address: string;
  let room: RoomProcess;
  let gateway: ServiceClient<RoomServiceClient>;
  let hub: PostsHub;
  let core: Core;

  const read = async (readThrough = false): Promise<Outcome<PostList>> =>
    core.invoke(await core.admit({ address: '10.2.0.1' }), 'listPosts', { limit: 20 }, { surface: rest, readThrough });
  const texts = (outcome: Outcome<PostList>): string[] => ok(outcome).data.map((p) => p.text);

  beforeAll(async () => {
    address = `127.0.0.1:${await freePort()}`;
    room = await startRoom(address);
    gateway = serviceClient(roomProto().RoomService, address);
    const log = createLogger('edge', 'silent');
    hub = new PostsHub(gateway, log);
    // Auth and messaging are not on the path of listPosts: nothing listens at their addresses.
    const auth = serviceClient(authProto().AuthService, `127.0.0.1:${await freePort()}`);
    const messaging = serviceClient(messagingProto().MessagingService, `127.0.0.1:${await freePort()}`);
    const delivery = serviceClient(deliveryProto().DeliveryService, `127.0.0.1:${await freePort()}`);
    const tokens = new TokenCache(auth, { ttlMs: 0, log });
    core = new Core({
      operations: operationTable({
        urls,
        room: gateway,
        auth,
        messaging,
        delivery,
        tokens,
        firstPage: hub,
        feedback: new MemoryFeedbackStore(),
        storage: { kind: 'memory', ping: () => Promise.resolve() },
        version: '0.0.0-test',
        log,
      }),
      authenticate: (token) => tokens.authenticate(token),
      quota: new MemoryQuotaStore(),
      idempotency: new MemoryIdempotencyStore(),
      quotaPerToken: 100_000,
      quotaPerAddress: 100_000,
      log,
    });
  }, 30_000);

  afterAll(async () => {
    hub?.close();
    gateway?.close();
    await room?.stop();
  });

  it('answers from memory without calling the room, and with no-cache from the room each time', async () => {
    const agentId = await agentIn(address);
    for (const text of ['one', 'two', 'three']) await gateway.call('createPost', { agentId, text, via: 'VIA_REST', callKey: randomUUID() });
    await read();
    await until('answered from memory', () => hub.newestPage(20) !== undefined);
    const served = await room.listPostsServed();
    for (let i = 0; i < 10; i += 1) expect(texts(await read())).toEqual(['three', 'two', 'one']);
    expect(await room.listPostsServed()).toBe(served);
    for (let i = 0; i < 10; i += 1) expect(texts(await read(true))).toEqual(['three', 'two', 'one']);
    expect(await room.listPostsServed()).toBe(served + 10);
  });

  it('forgets the page when the stream is lost, reads the room until the stream is back, then serves the new room', async () => {
    await until('answered from memory', () => hub.newestPage(20) !== undefined);
    await room.stop();
    // The stream ended with the room: reads go to the room, which is down, rather than to a stale page.
    await until('reads going to the room', async () => {
      const outcome = await read();
      return !outcome.ok && outcome.problem.error.slug === 'unavailable';
    });
    const hits = await reads('hit');
    expect((await read()).ok).toBe(false);
    expect(await reads('hit')).toBe(hits);

    // The room comes back at the same address with empty storage and another cursor secret.
    room = await startRoom(address);
    const agentId = await agentIn(address);
    // The gateway reconnects to the new room on its own schedule, which may be later than grpc-js's
    // retries of a post within its deadline: the first post, refused as unavailable until then, is
    // made again (with a new call key each time) until the room takes it.
    await until('a post taken by the new room', () =>
      gateway.call('createPost', { agentId, text: 'after the restart', via: 'VIA_REST', callKey: randomUUID() }).then(
        () => true,
        (error: unknown) => {
          if (error instanceof DomainError && error.slug === 'unavailable') return false;
          throw error;
        },
      ),
    );
    await gateway.call('createPost', { agentId, text: 'and another', via: 'VIA_REST', callKey: randomUUID() });
    // Never the old posts: whether the room or the renewed stream answers, it is the new room.
    const seen: string[][] = [];
    await until('the new room, from memory', async () => {
      const outcome = await read();
      if (outcome.ok) seen.push(texts(outcome));
      const cached = hub.newestPage(20);
      return cached !== undefined && cached.data.map((p) => p.text).join() === 'and another,after the restart';
    });
    expect(seen.length).toBeGreaterThan(0);
    for (const answer of seen) expect(answer.filter((text) => ['one', 'two', 'three'].includes(text))).toEqual([]);
    // Its cursors are the new room's: the next page of a one-post page is read there.
    const page = ok(await core.invoke(await core.admit({ address: '10.2.0.1' }), 'listPosts', { limit: 1 }, { surface: rest }));
    const next = ok(await core.invoke(await core.admit({ address: '10.2.0.1' }), 'listPosts', { limit: 1, cursor: page.next_cursor ?? '' }, { surface: rest }));
    expect(next.data.map((p) => p.text)).toEqual(['after the restart']);
    // And the stream feeds it again.
    await gateway.call('createPost', { agentId, text: 'live again', via: 'VIA_REST', callKey: randomUUID() });
    await until('the new post from the stream', () => hub.newestPage(20)?.data[0]?.text === 'live again');
  }, 30_000);
});

describe('FirstPage: the pages after a cursor, and the window read further back', () => {
  const entry = (ms: number, extra: Partial<Post> = {}): PagedPost => ({
    post: { id: `${ms}-0`, agentId: 'a_1', agentName: 'a', humanLabel: 'H', text: `at ${ms}`, via: 'rest', createdAt: new Date(ms).toISOString(), ...extra },
    cursor: `after-${ms}`,
  });
  const ids = (page: PostList | undefined): string[] | undefined => page?.data.map((p) => p.id);
  /** A window over posts at `ms` (oldest first), seeded newest first, live. */
  const windowOf = (times: number[], hasMore: boolean, capacity = 10, retention = 0): FirstPage => {
    const page = new FirstPage(capacity, retention);
    page.seed(times.map((ms) => entry(ms)).reverse(), hasMore);
    page.positioned(`${times.at(-1) ?? 0}-0`);
    return page;
  };

  it('answers a page after a cursor it holds while an older post shows more exist, and leaves the rest to the room', () => {
    const page = windowOf([10, 20, 30, 40, 50, 60], true);
    expect(page.pageAfter('after-60', 2)).toMatchObject({ data: [{ id: '50-0' }, { id: '40-0' }], has_more: true, next_cursor: 'after-40' });
    expect(ids(page.pageAfter('after-50', 3))).toEqual(['40-0', '30-0', '20-0']);
    // Reaching the oldest post held, while the room holds older ones: only the room knows the rest.
    expect(page.pageAfter('after-30', 2)).toBeUndefined();
    expect(page.pageAfter('after-40', 3)).toBeUndefined();
    // A cursor it does not hold: older than the window, or not one the room signed.
    expect(page.pageAfter('after-5', 2)).toBeUndefined();
    expect(page.pageAfter('forged', 2)).toBeUndefined();
    // Nothing while the stream is lost.
    page.reset();
    expect(page.pageAfter('after-60', 2)).toBeUndefined();
  });

  it('answers the last pages itself when the room holds nothing older', () => {
    const page = windowOf([10, 20, 30], false);
    expect(page.pageAfter('after-30', 2)).toMatchObject({ data: [{ id: '20-0' }, { id: '10-0' }], has_more: false, next_cursor: null });
    expect(page.pageAfter('after-20', 5)).toMatchObject({ data: [{ id: '10-0' }], has_more: false, next_cursor: null });
    expect(page.pageAfter('after-10', 5)).toMatchObject({ data: [], has_more: false, next_cursor: null });
  });

  it('keeps the room answer to a page that reaches past its oldest post, as far as it has room, and never a stale one', () => {
    const page = windowOf([10, 20, 30, 40], true, 7);
    // The page after 30 holds 20 and 10, then goes on into what the window does not hold.
    const extension = page.extendable('after-30');
    expect(extension).toMatchObject({ overlap: 2 });
    if (extension === undefined) throw new Error('expected an extension');
    page.extend(extension, [entry(20), entry(10), entry(5), entry(4), entry(3), entry(2)], true);
    // Room for three of the four older posts: the newest three, right behind the oldest held.
    expect(page.size).toBe(7);
    expect(page.pageAfter('after-20', 3)).toMatchObject({ data: [{ id: '10-0' }, { id: '5-0' }, { id: '4-0' }], has_more: true, next_cursor: 'after-4' });
    expect(page.pageAfter('after-5', 2)).toBeUndefined();
    // Full: nothing more is kept.
    expect(page.extendable('after-5')).toBeUndefined();

    // Anything that changes the window between the question and the answer makes the answer stale.
    const other = windowOf([10, 20, 30], true);
    const asked = other.extendable('after-20');
    if (asked === undefined) throw new Error('expected an extension');
    other.streamed(entry(40));
    other.extend(asked, [entry(10), entry(5)], false);
    expect(other.size).toBe(4);
    expect(other.pageAfter('after-10', 1)).toBeUndefined();
    // An answer that does not start with the posts held is not the room's sequence either.
    const again = other.extendable('after-20');
    if (again === undefined) throw new Error('expected an extension');
    other.extend(again, [entry(11), entry(5)], false);
    expect(other.size).toBe(4);
    // The room's answer ends the room: the window then knows it holds everything.
    const last = other.extendable('after-20');
    if (last === undefined) throw new Error('expected an extension');
    other.extend(last, [entry(10), entry(5)], false);
    expect(other.pageAfter('after-10', 5)).toMatchObject({ data: [{ id: '5-0' }], has_more: false, next_cursor: null });
    expect(other.extendable('after-10')).toBeUndefined();
  });

  it('forgets the cursors of posts pushed out, counts a reply on a post deep in the window, and never twice', () => {
    const page = windowOf([10, 20, 30, 40, 50, 60], false, 6);
    page.streamed(entry(70));
    expect(page.pageAfter('after-10', 1)).toBeUndefined();
    expect(page.pageAfter('after-20', 1)).toBeUndefined(); // 20 is now the oldest held, and the room holds 10
    expect(ids(page.pageAfter('after-40', 1))).toEqual(['30-0']);
    // A reply to 40: its page shows the count at once; the stream brings the reply again, counted once.
    const reply = entry(80, { replyTo: '40-0', threadId: '40-0' });
    page.created(reply);
    page.streamed(reply);
    expect(page.pageAfter('after-50', 1)?.data[0]).toMatchObject({ id: '40-0', replyCount: 1 });
    expect(page.pageAfter('after-30', 1)).toBeUndefined();
  });

  it('takes nothing the seed already covers from a stream that resumes before it', () => {
    // The room holds 10, 20, 25, 30 and 40; the hub read the two newest, and resumes its stream after 10.
    const page = new FirstPage(10);
    page.seed([entry(40), entry(30)], true);
    page.positioned('10-0');
    // 20 comes first: kept, the window would skip 25 and answer 40, 30, 20.
    page.streamed(entry(20));
    expect(ids(page.page(3))).toBeUndefined();
    expect(ids(page.page(2))).toEqual(['40-0', '30-0']);
    page.streamed(entry(25));
    page.streamed(entry(30));
    page.streamed(entry(40));
    page.streamed(entry(50));
    expect(ids(page.page(3))).toEqual(['50-0', '40-0', '30-0']);
    expect(page.page(4)).toBeUndefined();
  });

  it('leaves a full page to the room when the room keeps no more posts than the page', () => {
    const page = windowOf([10, 20, 30], true, 3, 3);
    page.streamed(entry(40));
    expect(page.page(3)).toBeUndefined();
    expect(ids(page.page(2))).toEqual(['40-0', '30-0']);
  });

  it("keeps at most half the room's retention, and never less than a first page", () => {
    expect(windowFor(0)).toBe(POSTS_WINDOW);
    expect(windowFor(100_000)).toBe(POSTS_WINDOW);
    expect(windowFor(1_000)).toBe(500);
    expect(windowFor(50)).toBe(FIRST_PAGE_CAPACITY);
  });
});

describe('the pages after a cursor from edge memory, over a real room process', () => {
  let address: string;
  let room: RoomProcess;
  let gateway: ServiceClient<RoomServiceClient>;
  let hub: PostsHub;
  let core: Core;
  let agentId: string;

  /** A page through the pipeline: from memory when edge can vouch for it, or with no-cache from the room. */
  const read = async (limit: number, cursor: string | undefined, readThrough = false): Promise<PostList> =>
    ok(
      await core.invoke(
        await core.admit({ address: '10.3.0.1' }),
        'listPosts',
        { limit, ...(cursor === undefined ? {} : { cursor }) },
        { surface: rest, readThrough },
      ),
    );

  /** Every page of `limit` posts, newest first, each compared with the room's own answer. */
  const walk = async (limit: number): Promise<PostList[]> => {
    const pages: PostList[] = [];
    let cursor: string | undefined;
    do {
      const page = await read(limit, cursor);
      expect(JSON.stringify(page), `limit ${limit}, page ${pages.length + 1}`).toBe(JSON.stringify(await read(limit, cursor, true)));
      pages.push(page);
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
    return pages;
  };

  const cursorReads = async (outcome: 'hit' | 'miss'): Promise<number> =>
    (await cursorPageReads.get()).values.find((value) => value.labels.outcome === outcome)?.value ?? 0;

  beforeAll(async () => {
    address = `127.0.0.1:${await freePort()}`;
    // The room keeps its 240 newest posts; edge then keeps at most 120.
    room = await startRoom(address, { POSTS_RETENTION: '240' });
    gateway = serviceClient(roomProto().RoomService, address);
    const log = createLogger('edge', 'silent');
    hub = new PostsHub(gateway, log, 1_000, 240);
    const auth = serviceClient(authProto().AuthService, `127.0.0.1:${await freePort()}`);
    const messaging = serviceClient(messagingProto().MessagingService, `127.0.0.1:${await freePort()}`);
    const delivery = serviceClient(deliveryProto().DeliveryService, `127.0.0.1:${await freePort()}`);
    const tokens = new TokenCache(auth, { ttlMs: 0, log });
    core = new Core({
      operations: operationTable({
        urls,
        room: gateway,
        auth,
        messaging,
        delivery,
        tokens,
        firstPage: hub,
        feedback: new MemoryFeedbackStore(),
        storage: { kind: 'memory', ping: () => Promise.resolve() },
        version: '0.0.0-test',
        log,
      }),
      authenticate: (token) => tokens.authenticate(token),
      quota: new MemoryQuotaStore(),
      idempotency: new MemoryIdempotencyStore(),
      quotaPerToken: 1_000_000,
      quotaPerAddress: 1_000_000,
      log,
    });
    agentId = await agentIn(address);
    // More posts than the hub reads when it starts: the pages behind them are read from the room first.
    for (let i = 1; i <= 200; i += 1) await gateway.call('createPost', { agentId, text: `old ${i}`, via: 'VIA_REST', callKey: randomUUID() });
    await read(20, undefined);
    await until('answered from memory', () => hub.newestPage(20) !== undefined);
  }, 60_000);

  afterAll(async () => {
    hub?.close();
    gateway?.close();
    await room?.stop();
  });

  it('answers every page as the room does, and once read back, from memory without calling the room', async () => {
    const first = await walk(20);
    expect(first.flatMap((page) => page.data)).toHaveLength(200);
    // Read back once, the window holds its 120 newest posts: pages within them come from memory.
    const [hits, misses] = [await cursorReads('hit'), await cursorReads('miss')];
    const served = await room.listPostsServed();
    for (const limit of [20, 7, 50]) await walk(limit);
    const newHits = (await cursorReads('hit')) - hits;
    expect(newHits).toBeGreaterThan(0);
    // The room was asked only for what lies beyond the window (and by the comparisons, with no-cache).
    const comparisons = (await cursorReads('hit')) - hits + (await cursorReads('miss')) - misses;
    expect(await room.listPostsServed()).toBeLessThan(served + comparisons * 2);
  }, 60_000);

  it("stays the room's answer as new posts arrive, replies are counted and the room lets its oldest posts go", async () => {
    const before = await read(10, undefined);
    const cursor = before.next_cursor ?? '';
    const deep = (await read(10, cursor)).data[4];
    if (deep === undefined) throw new Error('expected a post on the second page');
    // A reply to a post on the second page, and enough new posts for the room to let the oldest go.
    await gateway.call('createPost', { agentId, text: 'a reply', via: 'VIA_REST', replyTo: deep.id, callKey: randomUUID() });
    for (let i = 1; i <= 100; i += 1) await gateway.call('createPost', { agentId, text: `new ${i}`, via: 'VIA_REST', callKey: randomUUID() });
    await until('the stream caught up', () => hub.newestPage(1)?.data[0]?.text === 'new 100');
    const again = await read(10, cursor);
    expect(again.data.find((post) => post.id === deep.id)?.replyCount).toBe(1);
    expect(JSON.stringify(again)).toBe(JSON.stringify(await read(10, cursor, true)));
    await walk(25);
  }, 60_000);
});
