import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import {
  CLIENT_OPTIONS,
  createLogger,
  firstPageReads,
  freePort,
  HealthChecker,
  LIMIT_MAX,
  MemoryFeedbackStore,
  MemoryIdempotencyStore,
  MemoryQuotaStore,
  newCursorSecret,
  type Scope,
  unaryCall,
} from '@agentroom/kit';
import { roomProto, type UpsertAgentResponse__Output } from '@agentroom/proto';
import type { Post, PostList } from '@agentroom/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthGateway } from '../src/gateways/auth.gateway.js';
import { DeliveryGateway } from '../src/gateways/delivery.gateway.js';
import { MessagingGateway } from '../src/gateways/messaging.gateway.js';
import { type PagedPost, RoomGateway } from '../src/gateways/room.gateway.js';
import { FirstPage } from '../src/live/first-page.js';
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
    return ok(await tested.core.invoke(await tested.core.admit({ authorization: `Bearer ${writer}`, address: '10.1.0.2' }), 'createPost', { text }, { surface: rest }));
  };

  /** Until the hub has caught up with every post made so far, and answers from memory. */
  const settled = (): Promise<void> => until('the first page answered from memory', () => tested.hub.newestPage(1) !== undefined);

  beforeAll(async () => {
    backends = await startBackends();
    tested = coreOver(backends, { perToken: 100_000, perAddress: 100_000 });
    const admission = await tested.core.admit({ address: '10.1.0.3' });
    const started = ok(await tested.core.invoke(admission, 'startSignup', { scopes: ['posts:write'] satisfies Scope[], agent_name: 'pager' }, { surface: rest }));
    await approveAsHuman(backends.authHttp, started.user_code);
    const polled = ok(await tested.core.invoke(await tested.core.admit({ address: '10.1.0.3' }), 'pollSignup', { device_code: started.device_code }, { surface: rest }));
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
    const second = ok(await tested.core.invoke(await tested.core.admit({ address: '10.1.0.1' }), 'listPosts', { limit: 50, cursor: first.next_cursor ?? '' }, { surface: rest }));
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
    expect(page.page(5)).toMatchObject({ data: [{ id: '60-0' }, { id: '50-0' }, { id: '40-0' }, { id: '30-0' }, { id: '20-0' }], has_more: true, next_cursor: 'after-20' });
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
async function startRoom(address: string): Promise<RoomProcess> {
  const admin = await freePort();
  const child = spawn(process.execPath, [ROOM_SCRIPT], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'silent', ROOM_GRPC_ADDR: address, ADMIN_PORT: String(admin), CURSOR_SECRET: newCursorSecret() },
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
      const line = text.split('\n').find((row) => row.startsWith('agentroom_grpc_server_handled_seconds_count{') && row.includes('method="ListPosts"') && row.includes('code="OK"'));
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
  let gateway: RoomGateway;
  let hub: PostsHub;
  let core: Core;

  const read = async (readThrough = false): Promise<Outcome<PostList>> => core.invoke(await core.admit({ address: '10.2.0.1' }), 'listPosts', { limit: 20 }, { surface: rest, readThrough });
  const texts = (outcome: Outcome<PostList>): string[] => ok(outcome).data.map((p) => p.text);

  beforeAll(async () => {
    address = `127.0.0.1:${await freePort()}`;
    room = await startRoom(address);
    gateway = new RoomGateway(address, 2_000);
    const log = createLogger('edge', 'silent');
    hub = new PostsHub(gateway, log);
    // Auth and messaging are not on the path of listPosts: nothing listens at their addresses.
    const auth = new AuthGateway(`127.0.0.1:${await freePort()}`, 2_000);
    const messaging = new MessagingGateway(`127.0.0.1:${await freePort()}`, 2_000);
    const delivery = new DeliveryGateway(`127.0.0.1:${await freePort()}`, 2_000);
    core = new Core({
      operations: operationTable({ urls, room: gateway, auth, messaging, delivery, firstPage: hub, feedback: new MemoryFeedbackStore(), storage: { kind: 'memory', ping: () => Promise.resolve() }, version: '0.0.0-test', log }),
      authenticate: (token) => auth.authenticate(token),
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
    for (const text of ['one', 'two', 'three']) await gateway.createPost(agentId, text, 'rest');
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
    await gateway.createPost(agentId, 'after the restart', 'rest');
    await gateway.createPost(agentId, 'and another', 'rest');
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
    await gateway.createPost(agentId, 'live again', 'rest');
    await until('the new post from the stream', () => hub.newestPage(20)?.data[0]?.text === 'live again');
  }, 30_000);
});
