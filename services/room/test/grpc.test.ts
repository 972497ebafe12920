import { createServer, type Server } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { createLogger, DomainError, fromServiceError, freePort, HealthChecker, newCursorSecret, runWithContext, unaryCall, CLIENT_OPTIONS } from '@agentroom/kit';
import {
  type CreatePostResponse__Output,
  type ListPostsResponse__Output,
  roomProto,
  type RoomServiceClient,
  type UpsertAgentResponse__Output,
  type WatchPostsResponse__Output,
} from '@agentroom/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRoomGrpcServer, ROOM_SERVICE_NAME } from '../src/server.js';
import { MemoryRoomStore } from '../src/store-memory.js';

const DEADLINE = 2_000;
let server: ReturnType<typeof createRoomGrpcServer>;
let client: RoomServiceClient;
let address: string;
let agentId: string;

function newClient(target: string): RoomServiceClient {
  const RoomService = roomProto().RoomService;
  return new RoomService(target, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
}

function createPost(text: string, via = 'VIA_REST', author = agentId): Promise<CreatePostResponse__Output> {
  return unaryCall<CreatePostResponse__Output>(DEADLINE, (metadata, options, callback) =>
    client.createPost({ agentId: author, text, via: via as 'VIA_REST' }, metadata, options, callback),
  );
}

function listPosts(limit: number, cursor = ''): Promise<ListPostsResponse__Output> {
  return unaryCall<ListPostsResponse__Output>(DEADLINE, (metadata, options, callback) => client.listPosts({ limit, cursor }, metadata, options, callback));
}

async function rejection(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DomainError);
  return error as DomainError;
}

beforeAll(async () => {
  server = createRoomGrpcServer({ store: new MemoryRoomStore(), log: createLogger('room', 'silent'), cursorSecret: newCursorSecret() });
  const port = await server.listen('127.0.0.1:0');
  address = `127.0.0.1:${port}`;
  client = newClient(address);
  const made = await unaryCall<UpsertAgentResponse__Output>(DEADLINE, (metadata, options, callback) =>
    client.upsertAgent({ agent: { agentName: 'scout', humanLabel: 'Ada', scopes: ['posts:write'] } }, metadata, options, callback),
  );
  agentId = made.agent?.id ?? '';
});

afterAll(async () => {
  client.close();
  await server.shutdown(1_000);
});

describe('RoomService over a loopback socket', () => {
  it('creates a post as an agent, with its name, human label and via', async () => {
    const { post } = await createPost('hello room', 'VIA_MCP');
    expect(post).toMatchObject({ agentId, agentName: 'scout', humanLabel: 'Ada', text: 'hello room', via: 'VIA_MCP' });
    expect(Date.parse(post?.createdAt ?? '')).toBeGreaterThan(Date.now() - 60_000);
  });

  it('accepts 500 emoji (code points, not UTF-16 units) and refuses 501 characters', async () => {
    await expect(createPost('😀'.repeat(500))).resolves.toBeDefined();
    const error = await rejection(createPost('x'.repeat(501)));
    expect(error.slug).toBe('text-too-long');
    expect(error.status).toBe(400);
    // The service says what and how much, in fields; edge words the remedy for whoever asked.
    expect(error.fields).toEqual({ parameter: 'text', max_length: 500, length: 501 });
  });

  it.each(['', '   ', '\n\t '])('refuses empty or blank text %j', async (text) => {
    expect((await rejection(createPost(text))).slug).toBe('text-empty');
  });

  it('refuses a post from an unknown agent with NOT_FOUND carried as a problem', async () => {
    const error = await rejection(createPost('hi', 'VIA_REST', 'a_nobody0001'));
    expect(error.slug).toBe('agent-not-found');
    expect(error.status).toBe(404);
    expect(error.fields).toEqual({ parameter: 'agentId' });
  });

  it('refuses a post without via', async () => {
    expect((await rejection(createPost('hi', 'VIA_UNSPECIFIED'))).code).toBe('invalid_request');
  });

  it('lists posts newest first in pages whose cursor survives new posts', async () => {
    for (let i = 1; i <= 5; i += 1) await createPost(`page ${i}`);
    const first = await listPosts(2);
    expect(first.posts.map((p) => p.text)).toEqual(['page 5', 'page 4']);
    expect(first.hasMore).toBe(true);
    await createPost('page 6');
    const second = await listPosts(2, first.nextCursor);
    expect(second.posts.map((p) => p.text)).toEqual(['page 3', 'page 2']);
  });

  it("signs each post's cursor only when asked: the next_cursor of any page that ends with it", async () => {
    for (let i = 1; i <= 4; i += 1) await createPost(`cursored ${i}`);
    const plain = await listPosts(4);
    expect(plain.posts.map((p) => p.cursor)).toEqual(['', '', '', '']);
    const withCursors = await unaryCall<ListPostsResponse__Output>(DEADLINE, (metadata, options, callback) =>
      client.listPosts({ limit: 4, cursor: '', withCursors: true }, metadata, options, callback),
    );
    expect(withCursors.nextCursor).toBe(plain.nextCursor);
    for (let limit = 1; limit <= 4; limit += 1) {
      const page = await listPosts(limit);
      expect(page.nextCursor).toBe(withCursors.posts[limit - 1]?.cursor);
    }
    const created = await unaryCall<CreatePostResponse__Output>(DEADLINE, (metadata, options, callback) =>
      client.createPost({ agentId, text: 'cursored 5', via: 'VIA_REST', withCursor: true }, metadata, options, callback),
    );
    // The cursor a new post comes with resumes right after it.
    const after = await listPosts(1, created.post?.cursor ?? '');
    expect(after.posts[0]?.text).toBe('cursored 4');
    expect((await createPost('not asked')).post?.cursor).toBe('');

    const call = client.watchPosts({ afterId: withCursors.posts[0]?.id ?? '', withCursors: true });
    const streamed = await new Promise<WatchPostsResponse__Output>((resolve) => call.on('data', resolve));
    call.on('error', () => undefined);
    call.cancel();
    expect(streamed.post).toMatchObject({ id: created.post?.id, cursor: created.post?.cursor });
  });

  it('answers INVALID_ARGUMENT for a cursor it did not issue and a limit out of range', async () => {
    expect((await rejection(listPosts(2, 'bm90LWEtY3Vyc29y'))).slug).toBe('invalid-cursor');
    expect((await rejection(listPosts(51))).code).toBe('invalid_request');
  });

  it('streams new posts to a watcher, and resumes after an id', async () => {
    const { post: anchor } = await createPost('anchor');
    await createPost('missed while away 1');
    await createPost('missed while away 2');
    const call = client.watchPosts({ afterId: anchor?.id ?? '' });
    const seen: string[] = [];
    const got = new Promise<void>((resolve) => {
      call.on('data', (message: WatchPostsResponse__Output) => {
        seen.push(message.post?.text ?? '');
        if (seen.length === 3) resolve();
      });
    });
    call.on('error', () => undefined);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await createPost('live');
    await got;
    call.cancel();
    expect(seen).toEqual(['missed while away 1', 'missed while away 2', 'live']);
  });

  it('ends a watch at its deadline with DEADLINE_EXCEEDED, which maps to a 503 problem', async () => {
    const call = client.watchPosts({ afterId: '' }, { deadline: Date.now() + 200 });
    call.on('data', () => undefined);
    const error = await new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
    expect(error.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(fromServiceError(error)).toMatchObject({ slug: 'unavailable', status: 503 });
  });

  it('answers grpc.health.v1 for the server and for the room service', async () => {
    const health = new HealthChecker(address);
    expect(await health.check('')).toBe('SERVING');
    expect(await health.check(ROOM_SERVICE_NAME)).toBe('SERVING');
    expect(await health.check('no.such.Service')).toBe('SERVICE_UNKNOWN');
    health.close();
  });
});

describe('deadlines', () => {
  let silent: Server;

  afterAll(() => {
    silent.close();
  });

  it('fail a call to a peer that accepts but never answers, as a 503 problem, on time', async () => {
    // A real socket that accepts connections and never speaks HTTP/2.
    silent = createServer(() => undefined);
    const port = await freePort();
    await new Promise<void>((resolve) => silent.listen(port, '127.0.0.1', resolve));
    const stuck = newClient(`127.0.0.1:${port}`);
    const started = Date.now();
    const error = await rejection(
      unaryCall<ListPostsResponse__Output>(300, (metadata, options, callback) => stuck.listPosts({ limit: 1, cursor: '' }, metadata, options, callback)),
    );
    expect(error.status).toBe(503);
    expect(Date.now() - started).toBeLessThan(2_000);
    stuck.close();
  });
});

describe('graceful shutdown', () => {
  it('ends watch streams cleanly instead of cutting them, so watchers can resume', async () => {
    const own = createRoomGrpcServer({ store: new MemoryRoomStore(), log: createLogger('room', 'silent'), cursorSecret: newCursorSecret() });
    const port = await own.listen('127.0.0.1:0');
    const target = newClient(`127.0.0.1:${port}`);
    const watch = target.watchPosts({ afterId: '' });
    watch.on('data', () => undefined);
    const watchEnded = new Promise<string>((resolve) => {
      watch.on('end', () => resolve('end'));
      watch.on('error', (e: grpc.ServiceError) => resolve(`error ${e.code}`));
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = Date.now();
    await own.shutdown(5_000);
    expect(await watchEnded).toBe('end');
    // Well inside the grace period: the stream did not hold shutdown up.
    expect(Date.now() - started).toBeLessThan(2_000);
    target.close();
  });
});

describe('request ids', () => {
  it('cross the gRPC hop: the room logs the caller\'s requestId with its own service name', async () => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('room', 'debug', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const own = createRoomGrpcServer({ store: new MemoryRoomStore(), log, cursorSecret: newCursorSecret() });
    const port = await own.listen('127.0.0.1:0');
    const target = newClient(`127.0.0.1:${port}`);
    await runWithContext({ requestId: 'req-from-edge-42' }, () =>
      unaryCall<ListPostsResponse__Output>(DEADLINE, (metadata, options, callback) => target.listPosts({ limit: 1, cursor: '' }, metadata, options, callback)),
    );
    target.close();
    await own.shutdown(1_000);
    expect(lines).toContainEqual(expect.objectContaining({ service: 'room', requestId: 'req-from-edge-42', method: 'ListPosts', code: 'OK', msg: 'gRPC call handled' }));
  });
});
