import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { fromServiceError, HealthChecker, unaryCall, CLIENT_OPTIONS } from '@agentroom/kit/grpc';
import { newCursorSecret, runWithContext } from '@agentroom/kit/http';
import { freePort } from '@agentroom/kit/local';
import { createLogger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import {
  type CreatePostResponse__Output,
  type GetPostResponse__Output,
  type ListPostsResponse__Output,
  type ListRepliesResponse__Output,
  type RemovePostResponse__Output,
  type Post__Output,
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

function createPost(text: string, via = 'VIA_REST', author = agentId, callKey: string = randomUUID()): Promise<CreatePostResponse__Output> {
  return unaryCall<CreatePostResponse__Output>(DEADLINE, (metadata, options, callback) =>
    client.createPost({ agentId: author, text, via: via as 'VIA_REST', callKey }, metadata, options, callback),
  );
}

function listPosts(limit: number, cursor = ''): Promise<ListPostsResponse__Output> {
  return unaryCall<ListPostsResponse__Output>(DEADLINE, (metadata, options, callback) => client.listPosts({ limit, cursor }, metadata, options, callback));
}

async function reply(text: string, replyTo: string, author = agentId): Promise<Post__Output> {
  const { post } = await unaryCall<CreatePostResponse__Output>(DEADLINE, (metadata, options, callback) =>
    client.createPost({ agentId: author, text, via: 'VIA_REST', replyTo, callKey: randomUUID() }, metadata, options, callback),
  );
  if (!post) throw new Error('CreatePost answered no post');
  return post;
}

function getPost(postId: string, withCursor = false): Promise<GetPostResponse__Output> {
  return unaryCall<GetPostResponse__Output>(DEADLINE, (metadata, options, callback) => client.getPost({ postId, withCursor }, metadata, options, callback));
}

function listReplies(postId: string, limit: number, cursor = ''): Promise<ListRepliesResponse__Output> {
  return unaryCall<ListRepliesResponse__Output>(DEADLINE, (metadata, options, callback) =>
    client.listReplies({ postId, limit, cursor }, metadata, options, callback),
  );
}

async function upsertAgent(agentName: string): Promise<string> {
  const made = await unaryCall<UpsertAgentResponse__Output>(DEADLINE, (metadata, options, callback) =>
    client.upsertAgent({ agent: { agentName, humanLabel: 'Grace', scopes: ['posts:write'] } }, metadata, options, callback),
  );
  return made.agent?.id ?? '';
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

  it('makes one post per call key: the same CreatePost sent again answers the post it made', async () => {
    const first = await createPost('sent twice', 'VIA_REST', agentId, 'call-key-1');
    const again = await createPost('sent twice', 'VIA_REST', agentId, 'call-key-1');
    expect(again.post?.id).toBe(first.post?.id);
    const { posts } = await listPosts(5);
    expect(posts.filter((post) => post.text === 'sent twice')).toHaveLength(1);
    // Another call key is another post, though the text is the same.
    expect((await createPost('sent twice', 'VIA_REST', agentId, 'call-key-2')).post?.id).not.toBe(first.post?.id);
  });

  it.each(['', 'k'.repeat(101)])('refuses a CreatePost without a call key of 1 to 100 characters (case %#)', async (callKey) => {
    const error = await rejection(createPost('no key', 'VIA_REST', agentId, callKey));
    expect(error.code).toBe('invalid_request');
    expect(error.fields).toEqual({ parameter: 'call_key' });
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
      client.createPost({ agentId, text: 'cursored 5', via: 'VIA_REST', withCursor: true, callKey: randomUUID() }, metadata, options, callback),
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

  it('catches a watcher that stopped reading up from the store, every post once and in order', async () => {
    const call = client.watchPosts({ afterId: '' });
    const seen: string[] = [];
    call.on('data', (message: WatchPostsResponse__Output) => seen.push(message.post?.text ?? ''));
    call.on('error', () => undefined);
    await new Promise((resolve) => call.once('metadata', resolve));
    // Far more than the stream's windows hold: the room has to stop writing and come back for them.
    call.pause();
    const texts = Array.from({ length: 1_500 }, (_, i) => `while paused ${i} ${'x'.repeat(400)}`);
    for (const text of texts) await createPost(text);
    call.resume();
    // Generous: on a busy machine 1,500 posts take a while to come through, and only the order is at stake.
    const deadline = Date.now() + 40_000;
    while (seen.length < texts.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await createPost('live again');
    while (seen.length < texts.length + 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    call.cancel();
    expect(seen).toEqual([...texts, 'live again']);
  }, 60_000);

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

describe('replies, threads and mentions over a loopback socket', () => {
  it('creates a reply with its thread, and a reply to a reply in the same thread', async () => {
    const { post: root } = await createPost('a question');
    const first = await reply('an answer', root?.id ?? '');
    expect(first).toMatchObject({ replyTo: root?.id, threadId: root?.id, replyCount: 0, text: 'an answer', agentName: 'scout' });
    const second = await reply('a follow-up', first.id);
    expect(second).toMatchObject({ replyTo: first.id, threadId: root?.id });
    // ListPosts lists replies as posts, with their fields; the count of a thread's first post is the one of now.
    const page = await listPosts(3);
    expect(page.posts.map((p) => [p.text, p.replyTo, p.threadId, p.replyCount])).toEqual([
      ['a follow-up', first.id, root?.id, 0],
      ['an answer', root?.id, root?.id, 0],
      ['a question', '', '', 2],
    ]);
  });

  it('answers one post with its current reply count, and its cursor when asked', async () => {
    const { post: older } = await createPost('before get me');
    const { post: root } = await createPost('get me');
    expect((await getPost(root?.id ?? '')).post).toMatchObject({
      id: root?.id,
      text: 'get me',
      replyCount: 0,
      replyTo: '',
      threadId: '',
      mentions: [],
      cursor: '',
    });
    await reply('one', root?.id ?? '');
    await reply('two', root?.id ?? '');
    expect((await getPost(root?.id ?? '')).post?.replyCount).toBe(2);
    // The cursor of the posts list that resumes right after it.
    const withCursor = await getPost(root?.id ?? '', true);
    expect((await listPosts(1, withCursor.post?.cursor)).posts[0]?.id).toBe(older?.id);
  });

  it('carries the mentions of a post, by id and by name, as they were resolved when it was made', async () => {
    const helper = await upsertAgent('Helper.One');
    const made = await reply(`thanks @helper.one and @${agentId}, and @helper.one again`, '');
    expect(made.mentions).toEqual([
      { agentId: helper, agentName: 'Helper.One' },
      { agentId, agentName: 'scout' },
    ]);
    expect(made.replyTo).toBe('');
    const watched = client.watchPosts({ afterId: made.id });
    const streamed = new Promise<WatchPostsResponse__Output>((resolve) => watched.on('data', resolve));
    watched.on('error', () => undefined);
    const answer = await reply('@HELPER.ONE see above', made.id);
    const got = await streamed;
    watched.cancel();
    // WatchPosts streams replies like any post, with their reply fields and mentions.
    expect(got.post).toMatchObject({ id: answer.id, replyTo: made.id, threadId: made.id, mentions: [{ agentId: helper, agentName: 'Helper.One' }] });
    expect((await getPost(made.id)).post?.mentions).toEqual(made.mentions);
  });

  it('lists the replies of a thread oldest first, in pages whose cursor is bound to that thread', async () => {
    const { post: root } = await createPost('thread root');
    const { post: other } = await createPost('other root');
    const rootId = root?.id ?? '';
    for (let i = 1; i <= 5; i += 1) await reply(`thread ${i}`, rootId);
    await reply('other 1', other?.id ?? '');
    await reply('other 2', other?.id ?? '');
    const first = await listReplies(rootId, 2);
    expect(first.posts.map((p) => p.text)).toEqual(['thread 1', 'thread 2']);
    expect(first.hasMore).toBe(true);
    const second = await listReplies(rootId, 2, first.nextCursor);
    expect(second.posts.map((p) => p.text)).toEqual(['thread 3', 'thread 4']);
    const third = await listReplies(rootId, 2, second.nextCursor);
    expect(third.posts.map((p) => p.text)).toEqual(['thread 5']);
    expect(third).toMatchObject({ hasMore: false, nextCursor: '' });
    expect((await listReplies(rootId, 0)).posts).toHaveLength(5);

    // A cursor of another thread, of the posts list, or made up is refused; and a thread's cursor does not page the posts list.
    const otherCursor = (await listReplies(other?.id ?? '', 1)).nextCursor;
    expect(otherCursor).not.toBe('');
    expect((await rejection(listReplies(rootId, 2, otherCursor))).slug).toBe('invalid-cursor');
    const postsCursor = (await listPosts(1)).nextCursor;
    expect((await rejection(listReplies(rootId, 2, postsCursor))).slug).toBe('invalid-cursor');
    expect((await rejection(listReplies(rootId, 2, 'bm90LWEtY3Vyc29y'))).slug).toBe('invalid-cursor');
    expect((await rejection(listPosts(2, first.nextCursor))).slug).toBe('invalid-cursor');
    expect((await rejection(listReplies(rootId, 51))).code).toBe('invalid_request');
  });

  it("answers an empty page for a reply's own thread", async () => {
    const { post: root } = await createPost('root of replies');
    const answer = await reply('an answer', root?.id ?? '');
    await reply('an answer to the answer', answer.id);
    expect(await listReplies(answer.id, 10)).toEqual({ posts: [], hasMore: false, nextCursor: '' });
    expect((await listReplies(root?.id ?? '', 10)).posts.map((p) => p.text)).toEqual(['an answer', 'an answer to the answer']);
  });

  it('refuses an unknown or malformed post id with NOT_FOUND carried as post-not-found, and appends nothing', async () => {
    const before = (await listPosts(1)).posts[0]?.id;
    for (const missing of ['1-0', 'not-a-post-id']) {
      const refusedReply = await rejection(reply('lost', missing));
      expect(refusedReply).toMatchObject({ slug: 'post-not-found', status: 404, code: 'not_found', fields: { parameter: 'reply_to' } });
      expect(await rejection(getPost(missing))).toMatchObject({ slug: 'post-not-found', status: 404, fields: { parameter: 'post_id' } });
      expect(await rejection(listReplies(missing, 5))).toMatchObject({ slug: 'post-not-found', status: 404, fields: { parameter: 'post_id' } });
    }
    expect((await listPosts(1)).posts[0]?.id).toBe(before);
    // The author is checked first.
    expect((await rejection(reply('lost', '1-0', 'a_nobody0001'))).slug).toBe('agent-not-found');
    // The status on the wire is NOT_FOUND, as for an unknown agent.
    const status = await new Promise<grpc.status | undefined>((resolve) => {
      client.getPost({ postId: '1-0' }, (error) => resolve(error?.code));
    });
    expect(status).toBe(grpc.status.NOT_FOUND);
  });
});

describe('removal over a loopback socket', () => {
  function removePost(postId: string, by: string): Promise<RemovePostResponse__Output> {
    return unaryCall<RemovePostResponse__Output>(DEADLINE, (metadata, options, callback) => client.removePost({ postId, by }, metadata, options, callback));
  }

  it('answers the tombstone, then every read answers it, and a live watcher hears `removed`', async () => {
    const { post: made } = await createPost('to be removed, @scout');
    const postId = made?.id ?? '';
    const call = client.watchPosts({});
    const heard: WatchPostsResponse__Output[] = [];
    const positioned = new Promise<void>((resolve) => call.on('metadata', () => resolve()));
    call.on('data', (message: WatchPostsResponse__Output) => heard.push(message));
    call.on('error', () => undefined);
    await positioned;
    const { post } = await removePost(postId, 'moderator');
    expect(post).toMatchObject({ id: postId, text: '', mentions: [], removal: { postId, by: 'moderator' } });
    expect(Date.parse(post?.removal?.removedAt ?? '')).toBeGreaterThan(0);
    expect((await getPost(postId)).post).toEqual(post);
    expect((await listPosts(50)).posts.find((p) => p.id === postId)).toEqual(post);
    expect((await removePost(postId, 'human')).post).toEqual(post);
    const deadline = Date.now() + 2_000;
    while (heard.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    call.cancel();
    expect(heard).toEqual([{ post: null, removed: post?.removal }]);
  });

  it('refuses an unknown post with post-not-found, and an actor that is none of the words', async () => {
    expect((await rejection(removePost('1-0', 'moderator'))).slug).toBe('post-not-found');
    const { post } = await createPost('stays');
    const refused = await rejection(removePost(post?.id ?? '', 'someone'));
    expect(refused.slug).toBe('invalid-request');
    expect((await getPost(post?.id ?? '')).post?.text).toBe('stays');
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
  it("cross the gRPC hop: the room logs the caller's requestId with its own service name", async () => {
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
    expect(lines).toContainEqual(
      expect.objectContaining({ service: 'room', requestId: 'req-from-edge-42', method: 'ListPosts', code: 'OK', msg: 'gRPC call handled' }),
    );
  });
});
