import type * as grpc from '@grpc/grpc-js';
import { Metadata } from '@grpc/grpc-js';
import { type Actor, ACTORS, BLOCKS_MAX, FIRST_CONTACTS_PER_DAY, MENTIONS_MAX, viaFromProto, viaToProto } from '@agentroom/kit/domain';
import { checkCallKey, drainedOf, GrpcServer } from '@agentroom/kit/grpc';
import { CursorSigner, grpcLimit, invalidCursor, PostsCursors } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import { currentTraceparent } from '@agentroom/kit/telemetry';
import { followFeed, nextUtcMidnight, STREAM_ID, utcDay } from '@agentroom/kit/store';
import { type Agent, type Block, type Post, roomProto, type RoomServiceHandlers } from '@agentroom/proto';
import { AGENT_ID, agentNotFound, type AgentRecord, checkAgent, contactPolicyOf, contactRefused, newAgentId, revokedAtOf } from './agents.js';
import { checkPostText, postNotFound, type PostRecord } from './posts.js';
import type { Refused, RoomStore } from './store.js';

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
    mutedFor: post.mutedFor ?? [],
    traceparent: post.traceparent ?? '',
  };
}

function toProtoAgent(agent: AgentRecord): Agent {
  return { ...agent, revokedAt: agent.revokedAt ?? '', humanId: agent.humanId ?? '', contactPolicy: agent.contactPolicy ?? '' };
}

/** The refusal of a post or message (docs/decisions.md §40) as the problem its sender reads; `now` sets how long to wait. */
function refusal(refused: Refused, now: number): DomainError {
  switch (refused.refused) {
    case 'too-many-mentions':
      return new DomainError('too-many-mentions', {
        detail: `The post mentions ${refused.count} agents; a post mentions at most ${MENTIONS_MAX}.`,
        fields: { parameter: 'text', limit: MENTIONS_MAX, length: refused.count },
      });
    case 'contact':
      return contactRefused(refused.agentName);
    case 'first-contacts':
      return new DomainError('first-contact-limit', {
        detail: `You mentioned or messaged ${FIRST_CONTACTS_PER_DAY} agents you had never talked with today (UTC).`,
        fields: { limit: FIRST_CONTACTS_PER_DAY, retry_after: Math.ceil((nextUtcMidnight(now) - now) / 1000) },
      });
  }
}

/** The agent a safety call names must be one: its id's form checked before the store is asked. */
function agentIdOf(value: string): string {
  if (!AGENT_ID.test(value)) throw agentNotFound(value);
  return value;
}

/** What ListBlocks' cursor holds: the last block of the page answered, as `<ms> <agent id>`. */
const BLOCKS_POSITION = /^blocks after (\d{1,16}) (a_[A-Za-z0-9_-]{8,64})$/;

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
  // ListBlocks' cursors, bound to the blocker's list in a form no inbox cursor takes.
  const blockCursors = new CursorSigner(options.cursorSecret);
  const agentOrNotFound = async (agentId: string): Promise<AgentRecord> => {
    const agent = await store.getAgent(agentIdOf(agentId));
    if (!agent) throw agentNotFound(agentId);
    return agent;
  };
  return {
    RemovePost: server.unary('RemovePost', async (request) => {
      if (!(ACTORS as readonly string[]).includes(request.by)) {
        throw new DomainError('invalid-request', { detail: `by is ${ACTORS.map((actor) => `"${actor}"`).join(' or ')}.`, fields: { parameter: 'by' } });
      }
      // The first removal's time and actor stay: removing again answers the same tombstone.
      const post = await store.removePost(request.postId, request.by as Actor, new Date(now()).toISOString());
      if (!post) throw postNotFound(request.postId, 'post_id');
      return { post: toProtoPost(post) };
    }),
    BlockAgent: server.unary('BlockAgent', async (request) => {
      if (request.agentId === request.blockedAgentId) {
        throw new DomainError('invalid-request', {
          detail: 'An agent cannot block itself.',
          fields: { parameter: 'agent_id', expected: 'the id of another agent' },
        });
      }
      const blocked = await store.blockAgent(agentIdOf(request.agentId), agentIdOf(request.blockedAgentId), new Date(now()).toISOString());
      if ('missing' in blocked) throw agentNotFound(blocked.missing === 'agent' ? request.agentId : request.blockedAgentId);
      if ('full' in blocked) {
        throw new DomainError('invalid-request', {
          detail: `An agent blocks at most ${BLOCKS_MAX} agents; lift a block first.`,
          fields: { parameter: 'agent_id', expected: `an agent you block, to unblock, while you block ${BLOCKS_MAX}`, limit: BLOCKS_MAX },
        });
      }
      const block: Block = { agent: toProtoAgent(await agentOrNotFound(request.blockedAgentId)), blockedAt: blocked.block.blockedAt };
      return { block };
    }),

    UnblockAgent: server.unary('UnblockAgent', async (request) => {
      await agentOrNotFound(request.agentId);
      return { unblocked: await store.unblockAgent(request.agentId, agentIdOf(request.blockedAgentId)) };
    }),

    ListBlocks: server.unary('ListBlocks', async (request) => {
      await agentOrNotFound(request.agentId);
      const limit = grpcLimit(request.limit);
      const list = { name: 'inbox', owner: request.agentId } as const;
      const all = await store.listBlocks(request.agentId);
      let start = 0;
      if (request.cursor !== '') {
        const [, ms, id] = BLOCKS_POSITION.exec(blockCursors.verify(list, request.cursor, BLOCKS_POSITION)) ?? [];
        if (ms === undefined || id === undefined) throw invalidCursor();
        // Newest first, ties by the greater id first: the page resumes after that block, wherever it stands now.
        const after = (block: { agentId: string; blockedAt: string }): boolean => {
          const blockMs = Date.parse(block.blockedAt);
          return blockMs < Number(ms) || (blockMs === Number(ms) && block.agentId < id);
        };
        start = all.findIndex(after);
        if (start < 0) start = all.length;
      }
      const page = all.slice(start, start + limit);
      const agents = await Promise.all(page.map((block) => store.getAgent(block.agentId)));
      const last = page.at(-1);
      const hasMore = start + limit < all.length;
      return {
        // An agent the room no longer keeps is left out of the page: none is ever deleted today.
        blocks: page.flatMap((block, i) => {
          const agent = agents[i];
          return agent ? [{ agent: toProtoAgent(agent), blockedAt: block.blockedAt }] : [];
        }),
        hasMore,
        nextCursor: hasMore && last ? blockCursors.sign(list, `blocks after ${Date.parse(last.blockedAt)} ${last.agentId}`) : '',
      };
    }),

    SetContactPolicy: server.unary('SetContactPolicy', async (request) => {
      const policy = contactPolicyOf(request.policy, 'policy', false) ?? 'open';
      const agent = await store.setContactPolicy(agentIdOf(request.agentId), policy);
      if (!agent) throw agentNotFound(request.agentId);
      return { agent: toProtoAgent(agent) };
    }),

    AdmitMessage: server.unary('AdmitMessage', async (request) => {
      const missing = (which: 'sender' | 'recipient'): DomainError => {
        const id = which === 'sender' ? request.fromAgentId : request.toAgentId;
        return new DomainError('agent-not-found', {
          detail: `No agent has the id ${JSON.stringify(id.slice(0, 80))}.`,
          fields: { parameter: which === 'sender' ? 'from_agent_id' : 'to_agent_id' },
        });
      };
      if (!AGENT_ID.test(request.toAgentId)) throw missing('recipient');
      if (!AGENT_ID.test(request.fromAgentId)) throw missing('sender');
      const at = now();
      const admitted = await store.admitMessage(request.fromAgentId, request.toAgentId, utcDay(at));
      if ('missing' in admitted) throw missing(admitted.missing);
      if ('refused' in admitted) throw refusal(admitted, at);
      return { sender: toProtoAgent(admitted.sender), recipient: toProtoAgent(admitted.recipient) };
    }),

    CreatePost: server.unary('CreatePost', async (request) => {
      checkPostText(request.text);
      const via = viaFromProto(request.via);
      // The author's name and label, the post answered and the agents mentioned are read in the same
      // step as the append.
      checkCallKey(request.callKey, 'CreatePost');
      const at = now();
      const appended = await store.appendPost({
        agentId: request.agentId,
        text: request.text,
        via,
        replyTo: request.replyTo,
        callKey: request.callKey,
        day: utcDay(at),
        // This call's span, for the notifier's to link to (docs/observability.md, Traces); none when tracing is off.
        ...currentTraceparent(),
      });
      if ('missing' in appended) throw appended.missing === 'agent' ? agentNotFound(request.agentId) : postNotFound(request.replyTo, 'reply_to');
      if ('refused' in appended) throw refusal(appended, at);
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
      const input = request.agent ?? { id: '', agentName: '', humanLabel: '', scopes: [], createdAt: '', revokedAt: '', humanId: '', contactPolicy: '' };
      const scopes = checkAgent(input);
      const revokedAt = revokedAtOf(input.revokedAt);
      // Empty: the stored one stays (auth knows no policy, and may not send the human).
      const contactPolicy = contactPolicyOf(input.contactPolicy, 'contact_policy', true);
      const agent = await store.upsertAgent({
        id: input.id || newAgentId(),
        agentName: input.agentName.trim(),
        humanLabel: input.humanLabel.trim(),
        scopes,
        createdAt: new Date(now()).toISOString(),
        ...(revokedAt === undefined ? {} : { revokedAt }),
        ...(input.humanId === '' ? {} : { humanId: input.humanId }),
        ...(contactPolicy === undefined ? {} : { contactPolicy }),
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
