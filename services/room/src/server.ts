import { pending } from '@agentroom/kit/grpc';
import type * as grpc from '@grpc/grpc-js';
import { Metadata } from '@grpc/grpc-js';
import { type Actor, ACTORS, viaFromProto, viaToProto } from '@agentroom/kit/domain';
import { checkCallKey, drainedOf, GrpcServer } from '@agentroom/kit/grpc';
import { grpcLimit, PostsCursors } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import { followFeed, STREAM_ID } from '@agentroom/kit/store';
import { type Agent, type Post, roomProto, type RoomServiceHandlers } from '@agentroom/proto';
import { agentNotFound, type AgentRecord, checkAgent, newAgentId, revokedAtOf } from './agents.js';
import { checkPostText, postNotFound, type PostRecord } from './posts.js';
import type { RoomStore } from './store.js';

export const ROOM_SERVICE_NAME = 'agentroom.room.v1.RoomService';

/** A post on the wire; `cursor` only for a caller that asked for cursors (with_cursor, with_cursors). */
function toProtoPost(post: PostRecord, cursor = ''): Post {
  return {
    id: post.id,
    agentId: post.agentId,
    agentName: post.agentName,
    humanLabel: post.humanLabel,
    text: post.text,
    via: viaToProto(post.via),
    createdAt: post.createdAt,
    cursor,
    replyTo: post.replyTo ?? '',
    threadId: post.threadId ?? '',
    replyCount: post.replyCount ?? 0,
    mentions: post.mentions.map((mention) => ({ agentId: mention.agentId, agentName: mention.agentName })),
    replyToAgentId: post.replyToAgentId ?? '',
    removal: post.removal ?? null,
    mutedFor: [],
  };
}

function toProtoAgent(agent: AgentRecord): Agent {
  return { ...agent, revokedAt: agent.revokedAt ?? '' };
}

export interface RoomHandlersOptions {
  store: RoomStore;
  /** The deployment's cursor secret (CURSOR_SECRET): the posts list's cursors are signed with it. */
  cursorSecret: string;
  clock?: () => number;
}

/** The RoomService over a store: thin wiring; rules live in posts.ts and agents.ts. */
export function roomHandlers(server: GrpcServer, options: RoomHandlersOptions): RoomServiceHandlers {
  const { store } = options;
  const now = options.clock ?? Date.now;
  // The record signs and reads the same cursors (kit's PostsCursors): a page of either continues in the other.
  const cursors = new PostsCursors(options.cursorSecret);
  // A post's cursor resumes the list right after it, whatever the page's limit: so an edge that keeps
  // the newest posts answers any first page with the room's own next_cursor, and never holds the secret.
  const cursorOf = (post: PostRecord): string => cursors.afterPost(post.id);
  return {
    BlockAgent: pending('BlockAgent') as never,
    UnblockAgent: pending('UnblockAgent') as never,
    ListBlocks: pending('ListBlocks') as never,
    SetContactPolicy: pending('SetContactPolicy') as never,
    AdmitMessage: pending('AdmitMessage') as never,
    RemovePost: server.unary('RemovePost', async (request) => {
      if (!(ACTORS as readonly string[]).includes(request.by)) {
        throw new DomainError('invalid-request', { detail: `by is ${ACTORS.map((actor) => `"${actor}"`).join(' or ')}.`, fields: { parameter: 'by' } });
      }
      // The first removal's time and actor stay: removing again answers the same tombstone.
      const post = await store.removePost(request.postId, request.by as Actor, new Date(now()).toISOString());
      if (!post) throw postNotFound(request.postId, 'post_id');
      return { post: toProtoPost(post) };
    }),
    CreatePost: server.unary('CreatePost', async (request) => {
      checkPostText(request.text);
      const via = viaFromProto(request.via);
      // The author's name and label, the post answered and the agents mentioned are read in the same
      // step as the append.
      checkCallKey(request.callKey, 'CreatePost');
      const appended = await store.appendPost({ agentId: request.agentId, text: request.text, via, replyTo: request.replyTo, callKey: request.callKey });
      if ('missing' in appended) throw appended.missing === 'agent' ? agentNotFound(request.agentId) : postNotFound(request.replyTo, 'reply_to');
      const { post } = appended;
      return { post: toProtoPost(post, request.withCursor ? cursorOf(post) : '') };
    }),

    ListPosts: server.unary('ListPosts', async (request) => {
      const limit = grpcLimit(request.limit);
      const before = request.cursor === '' ? undefined : cursors.postOf(request.cursor);
      const page = await store.listPosts(limit, before);
      // Only when asked: the plain list signs one cursor per page, not one per post.
      const posts = page.items.map((post) => toProtoPost(post, request.withCursors ? cursorOf(post) : ''));
      const last = page.items.at(-1);
      return {
        posts,
        hasMore: page.hasMore,
        nextCursor: page.hasMore && last ? (posts.at(-1)?.cursor ?? '') || cursorOf(last) : '',
      };
    }),

    GetPost: server.unary('GetPost', async (request) => {
      const post = await store.getPost(request.postId);
      if (!post) throw postNotFound(request.postId, 'post_id');
      return { post: toProtoPost(post, request.withCursor ? cursorOf(post) : '') };
    }),

    ListReplies: server.unary('ListReplies', async (request) => {
      const limit = grpcLimit(request.limit);
      const after = request.cursor === '' ? undefined : cursors.replyOf(request.cursor, request.postId);
      const page = await store.listReplies(request.postId, limit, after);
      if (!page) throw postNotFound(request.postId, 'post_id');
      const last = page.items.at(-1);
      return {
        posts: page.items.map((post) => toProtoPost(post)),
        hasMore: page.hasMore,
        nextCursor: page.hasMore && last ? cursors.afterReply(request.postId, last.id) : '',
      };
    }),

    WatchPosts: server.serverStream('WatchPosts', async (request, call) => {
      if (request.afterId !== '' && !STREAM_ID.test(request.afterId)) {
        throw new DomainError('invalid-request', {
          detail: 'after_id is not a post id.',
          fields: { parameter: 'after_id', expected: 'the id of a post you received, or empty to watch from now on' },
        });
      }
      const stop = new AbortController();
      call.on('cancelled', () => stop.abort());
      call.on('close', () => stop.abort());
      const signal = AbortSignal.any([stop.signal, server.drainSignal]);
      // Removals are told live, from before the watcher is positioned (docs/decisions.md §42).
      const unsubscribeRemovals = await store.subscribeRemovals((removed) => {
        if (!signal.aborted) call.write({ removed });
      });
      try {
        // Initial metadata tells the watcher it is positioned: every post created from then on reaches it.
        // A watcher that reads slower than posts come (paused, or busy) is caught up from the store once
        // its stream has room, rather than have every post since queued for it here.
        await followFeed(
          store,
          request.afterId || undefined,
          (post) => call.write({ post: toProtoPost(post, request.withCursors ? cursorOf(post) : '') }),
          signal,
          {
            onPositioned: () => call.sendMetadata(new Metadata()),
            drained: drainedOf(call, signal),
          },
        );
      } finally {
        unsubscribeRemovals();
      }
      if (!call.cancelled) call.end();
    }),

    UpsertAgent: server.unary('UpsertAgent', async (request) => {
      const input = request.agent ?? { id: '', agentName: '', humanLabel: '', scopes: [], createdAt: '', revokedAt: '' };
      const scopes = checkAgent(input);
      const revokedAt = revokedAtOf(input.revokedAt);
      const agent = await store.upsertAgent({
        id: input.id || newAgentId(),
        agentName: input.agentName.trim(),
        humanLabel: input.humanLabel.trim(),
        scopes,
        createdAt: new Date(now()).toISOString(),
        ...(revokedAt === undefined ? {} : { revokedAt }),
      });
      return { agent: toProtoAgent(agent) };
    }),

    ListAgents: server.unary('ListAgents', async (request) => {
      const page = await store.listAgents(grpcLimit(request.limit), request.includeRevoked);
      return { agents: page.items.map(toProtoAgent), hasMore: page.hasMore };
    }),

    GetAgent: server.unary('GetAgent', async (request) => {
      const agent = await store.getAgent(request.agentId);
      if (!agent) throw agentNotFound(request.agentId);
      return { agent: toProtoAgent(agent) };
    }),
  };
}

export interface RoomGrpcServerOptions extends RoomHandlersOptions {
  log: Logger;
}

/** A gRPC server with the room service and health registered, not yet listening. */
export function createRoomGrpcServer(options: RoomGrpcServerOptions): GrpcServer {
  const server = new GrpcServer('room', options.log);
  const handlers = roomHandlers(server, options);
  server.addService(ROOM_SERVICE_NAME, roomProto().RoomService.service, handlers as grpc.UntypedServiceImplementation);
  return server;
}
