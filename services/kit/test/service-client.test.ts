import { once } from 'node:events';
import { type AddressInfo, createServer, connect, type Socket } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import {
  type GetAgentRequest__Output,
  type GetAgentResponse,
  type GetPostRequest__Output,
  type GetPostResponse,
  type ListPostsRequest,
  type ListPostsRequest__Output,
  type ListPostsResponse,
  type ListPostsResponse__Output,
  roomProto,
  type RoomServiceClient,
  type RoomServiceHandlers,
  type UpsertAgentRequest__Output,
  type UpsertAgentResponse,
  type WatchPostsRequest__Output,
  type WatchPostsResponse,
  type WatchPostsResponse__Output,
} from '@agentroom/proto';
import { afterAll, afterEach, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  type AnswerOf,
  GrpcServer,
  type ItemOf,
  type RequestOf,
  type ServiceClient,
  serviceClient,
  type StreamMethod,
  type UnaryMethod,
} from '../src/grpc/index.js';
import { currentContext, runWithContext } from '../src/http/index.js';
import { freePort } from '../src/local/index.js';
import { createLogger } from '../src/log.js';
import { DomainError } from '../src/problems.js';

/**
 * kit's typed client against real gRPC servers on loopback (kit's GrpcServer, which maps errors and
 * reads request ids as every service's does), serving the room's proto with handlers written here:
 * the client's own behaviour (names, types, deadline, errors, repeats) is under test, not the room's.
 */
const RoomService = roomProto().RoomService;
const log = createLogger('test', 'silent');

interface Replica {
  address: string;
  /** Request ids the replica's handlers saw, by method. */
  seen: { method: string; requestId: string | undefined }[];
  stop(): Promise<void>;
}

/** A TCP relay to `port` whose `cut()` resets every connection and takes no more: a replica killed outright, as its clients see it. */
async function relay(port: number): Promise<{ port: number; cut(): void }> {
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
    const outbound = connect(port, '127.0.0.1');
    for (const socket of [inbound, outbound]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    cut() {
      server.close();
      for (const socket of sockets) socket.resetAndDestroy();
    },
  };
}

/**
 * A room replica named `name` (its ListPosts answers carry it as the post's text). With `dies`, it
 * is reached through a relay, and the first ListPosts or UpsertAgent it takes sends its response
 * headers, then the relay cuts every connection with the call open: a connection lost after the
 * answer began, which grpc-js never retries itself.
 */
async function replica(name: string, options: { dies?: boolean } = {}): Promise<Replica> {
  const server = new GrpcServer('test', log);
  const seen: Replica['seen'] = [];
  const note = (method: string): void => void seen.push({ method, requestId: currentContext()?.requestId });
  let cut = (): void => undefined;
  const dying = async (call: grpc.ServerUnaryCall<unknown, unknown>): Promise<void> => {
    if (options.dies !== true) return;
    call.sendMetadata(new grpc.Metadata());
    // Time for the headers to reach the client through the relay.
    await new Promise((resolve) => setTimeout(resolve, 50));
    cut();
    await new Promise(() => undefined);
  };
  const handlers: Partial<RoomServiceHandlers> = {
    ListPosts: server.unary('ListPosts', async (request: ListPostsRequest__Output, call): Promise<ListPostsResponse> => {
      note('ListPosts');
      await dying(call);
      return { posts: [{ id: '1-0', text: name, via: 'VIA_REST' }], hasMore: request.limit === 1 };
    }),
    UpsertAgent: server.unary('UpsertAgent', async (_request: UpsertAgentRequest__Output, call): Promise<UpsertAgentResponse> => {
      note('UpsertAgent');
      await dying(call);
      return { agent: { id: `a_${name}` } };
    }),
    GetPost: server.unary('GetPost', (request: GetPostRequest__Output): Promise<GetPostResponse> => {
      note('GetPost');
      return Promise.reject(new DomainError('post-not-found', { detail: `No post has the id ${request.postId}.` }));
    }),
    // Never answers: the caller's deadline ends the call.
    GetAgent: server.unary('GetAgent', (_request: GetAgentRequest__Output): Promise<GetAgentResponse> => new Promise(() => undefined)),
    WatchPosts: server.serverStream(
      'WatchPosts',
      (request: WatchPostsRequest__Output, call: grpc.ServerWritableStream<WatchPostsRequest__Output, WatchPostsResponse>) => {
        note('WatchPosts');
        call.sendMetadata(new grpc.Metadata());
        for (const id of ['2-0', '3-0']) call.write({ post: { id, text: `after ${request.afterId}`, via: 'VIA_REST' } });
        call.end();
      },
    ),
  };
  server.addService('agentroom.room.v1.RoomService', RoomService.service, handlers as grpc.UntypedServiceImplementation);
  const port = await server.listen('127.0.0.1:0');
  if (options.dies !== true) return { address: `127.0.0.1:${port}`, seen, stop: () => server.shutdown(0) };
  const front = await relay(port);
  cut = () => front.cut();
  return { address: `127.0.0.1:${front.port}`, seen, stop: () => server.shutdown(0) };
}

describe('serviceClient', () => {
  let one: Replica;
  const room = (): ServiceClient<RoomServiceClient> => serviceClient(RoomService, one.address, { deadlineMs: 500 });

  beforeAll(async () => {
    one = await replica('one');
  });

  afterAll(async () => {
    await one?.stop();
  });

  it('calls an RPC by its name with the generated request, answers its output with proto3 defaults, and carries the request id', async () => {
    const client = room();
    try {
      const answer = await runWithContext({ requestId: 'req_typed' }, () => client.call('listPosts', { limit: 1 }));
      expect(answer).toEqual({
        posts: [expect.objectContaining({ id: '1-0', text: 'one', agentId: '', replyCount: 0, mentions: [] })],
        hasMore: true,
        nextCursor: '',
      });
      expect(one.seen.at(-1)).toEqual({ method: 'ListPosts', requestId: 'req_typed' });
      expect(client.service).toBe('agentroom.room.v1.RoomService');
    } finally {
      client.close();
    }
  });

  it("knows only the proto's RPCs, each with its own request and answer (the types are checked by the typecheck)", async () => {
    expectTypeOf<UnaryMethod<RoomServiceClient>>().toEqualTypeOf<
      | 'admitMessage'
      | 'blockAgent'
      | 'createPost'
      | 'getAgent'
      | 'getPost'
      | 'listAgents'
      | 'listBlocks'
      | 'listPosts'
      | 'listReplies'
      | 'removePost'
      | 'setContactPolicy'
      | 'unblockAgent'
      | 'upsertAgent'
    >();
    expectTypeOf<StreamMethod<RoomServiceClient>>().toEqualTypeOf<'watchPosts'>();
    expectTypeOf<RequestOf<RoomServiceClient, 'listPosts'>>().toEqualTypeOf<ListPostsRequest>();
    expectTypeOf<AnswerOf<RoomServiceClient, 'listPosts'>>().toEqualTypeOf<ListPostsResponse__Output>();
    expectTypeOf<ItemOf<RoomServiceClient, 'watchPosts'>>().toEqualTypeOf<WatchPostsResponse__Output>();
    const client = room();
    try {
      // @ts-expect-error: the room has no such RPC.
      await expect(client.call('deletePost', { postId: '1-0' })).rejects.toThrow('agentroom.room.v1.RoomService has no method deletePost');
      // @ts-expect-error: ListPosts takes no postId.
      expect((await client.call('listPosts', { postId: '1-0' })).posts).toHaveLength(1);
    } finally {
      client.close();
    }
  });

  it('answers a failure as the DomainError the service threw, its detail kept', async () => {
    const client = room();
    try {
      const error = await client.call('getPost', { postId: '9-9' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DomainError);
      expect(error).toMatchObject({ slug: 'post-not-found', status: 404, detail: 'No post has the id 9-9.' });
    } finally {
      client.close();
    }
  });

  it('ends a call the service does not answer at its deadline, as unavailable', async () => {
    const client = room();
    try {
      const error = await client.call('getAgent', { agentId: 'a_slow' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DomainError);
      expect(error).toMatchObject({ slug: 'unavailable', status: 503, detail: 'An internal service did not answer in time.' });
    } finally {
      client.close();
    }
  });

  it('opens a server stream by its name, with the request id and the generated item type', async () => {
    const client = room();
    try {
      const stream = runWithContext({ requestId: 'req_watch' }, () => client.watch('watchPosts', { afterId: '1-0' }));
      const items: string[] = [];
      stream.on('data', (item: WatchPostsResponse__Output) => items.push(`${item.post?.id}: ${item.post?.text}`));
      await once(stream, 'end');
      expect(items).toEqual(['2-0: after 1-0', '3-0: after 1-0']);
      expect(one.seen.at(-1)).toEqual({ method: 'WatchPosts', requestId: 'req_watch' });
    } finally {
      client.close();
    }
  });

  it('checks grpc.health.v1 of its own service: SERVING, or UNREACHABLE where nobody listens', async () => {
    const client = room();
    const nobody = serviceClient(RoomService, `127.0.0.1:${await freePort()}`, { deadlineMs: 500 });
    try {
      expect(await client.check()).toBe('SERVING');
      expect(await nobody.check()).toBe('UNREACHABLE');
    } finally {
      client.close();
      nobody.close();
    }
  });
});

describe('serviceClient, when a replica goes away after its answer began', () => {
  const replicas: Replica[] = [];

  afterEach(async () => {
    await Promise.all(replicas.splice(0).map((each) => each.stop()));
  });

  /** Calls `method` through a client of both replicas until the dying one has taken a call: that call's outcome. */
  async function throughDeath(method: 'listPosts' | 'upsertAgent'): Promise<{ answer?: unknown; error?: unknown }> {
    const [dies, lives] = [await replica('dies', { dies: true }), await replica('lives')];
    replicas.push(dies, lives);
    const client = serviceClient(RoomService, `ipv4:${dies.address},${lives.address}`, { deadlineMs: 2_000 });
    try {
      // round_robin takes the replicas in turn: within a few calls one goes to the replica that dies.
      for (let i = 0; i < 10; i += 1) {
        const before = dies.seen.length;
        const call = method === 'listPosts' ? client.call('listPosts', { limit: 5 }) : client.call('upsertAgent', { agent: { agentName: 'once' } });
        const outcome = await call.then(
          (answer: unknown) => ({ answer }),
          (error: unknown) => ({ error }),
        );
        if (dies.seen.length > before) return outcome;
      }
      throw new Error('no call went to the replica that dies');
    } finally {
      client.close();
    }
  }

  it('makes a read once more, on the other replica, within the same deadline: the caller sees the answer', async () => {
    const outcome = await throughDeath('listPosts');
    expect(outcome.error).toBeUndefined();
    expect(outcome.answer).toMatchObject({ posts: [{ text: 'lives' }] });
  });

  it('never makes again a write its proto does not call idempotent: the caller sees unavailable', async () => {
    const outcome = await throughDeath('upsertAgent');
    expect(outcome.answer).toBeUndefined();
    expect(outcome.error).toBeInstanceOf(DomainError);
    expect(outcome.error).toMatchObject({ slug: 'unavailable', detail: 'An internal service is unreachable.' });
  });
});
