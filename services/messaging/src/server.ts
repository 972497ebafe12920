import type * as grpc from '@grpc/grpc-js';
import { Metadata } from '@grpc/grpc-js';
import { CursorSigner, DomainError, followFeed, GrpcServer, grpcLimit, type Logger, STREAM_ID, viaFromProto, viaToProto } from '@agentroom/kit';
import { type Message, messagingProto, type MessagingServiceHandlers } from '@agentroom/proto';
import { checkMessageText, type MessageRecord, recipientNotFound, senderNotFound } from './messages.js';
import type { RoomGateway } from './room.gateway.js';
import type { MessagingStore } from './store.js';

export const MESSAGING_SERVICE_NAME = 'agentroom.messaging.v1.MessagingService';

// Agent ids name Redis keys: only these characters (every id the room makes fits).
const AGENT_ID = /^[A-Za-z0-9_-]{1,100}$/;

function toProtoMessage(message: MessageRecord): Message {
  return { ...message, via: viaToProto(message.via) };
}

/** Whose inbox: edge always passes the token's own agent. */
function inboxOwner(agentId: string): string {
  if (AGENT_ID.test(agentId)) return agentId;
  throw new DomainError('invalid-request', {
    detail: 'agent_id is missing or malformed.',
    fields: { parameter: 'agent_id', expected: 'the id of the agent whose inbox this is' },
  });
}

export interface MessagingHandlersOptions {
  store: MessagingStore;
  room: Pick<RoomGateway, 'getAgent'>;
  /** The deployment's cursor secret (CURSOR_SECRET): inbox cursors are signed with it, each bound to its inbox. */
  cursorSecret: string;
}

/** The MessagingService over a store and the room: thin wiring; rules live in messages.ts. */
export function messagingHandlers(server: GrpcServer, options: MessagingHandlersOptions): MessagingServiceHandlers {
  const { store, room } = options;
  const cursors = new CursorSigner(options.cursorSecret);
  return {
    SendMessage: server.unary('SendMessage', async (request) => {
      checkMessageText(request.text);
      const via = viaFromProto(request.via);
      if (!AGENT_ID.test(request.toAgentId)) throw recipientNotFound(request.toAgentId);
      if (!AGENT_ID.test(request.fromAgentId)) throw senderNotFound(request.fromAgentId);
      // Sending to oneself is allowed (a note to self): both ends are then the same agent.
      const [from, to] = await Promise.all([room.getAgent(request.fromAgentId), room.getAgent(request.toAgentId)]);
      if (!to) throw recipientNotFound(request.toAgentId);
      if (!from) throw senderNotFound(request.fromAgentId);
      const message = await store.appendMessage({
        fromAgentId: from.id,
        fromAgentName: from.agentName,
        toAgentId: to.id,
        toAgentName: to.agentName,
        text: request.text,
        via,
      });
      return { message: toProtoMessage(message) };
    }),

    ListMessages: server.unary('ListMessages', async (request) => {
      const agentId = inboxOwner(request.agentId);
      const limit = grpcLimit(request.limit);
      // Bound to the inbox's owner: a cursor from one agent's inbox does not page another's.
      const inbox = { name: 'inbox', owner: agentId } as const;
      const before = request.cursor === '' ? undefined : cursors.verify(inbox, request.cursor, STREAM_ID);
      const page = await store.listInbox(agentId, limit, before);
      const last = page.items.at(-1);
      return {
        messages: page.items.map(toProtoMessage),
        hasMore: page.hasMore,
        nextCursor: page.hasMore && last ? cursors.sign(inbox, last.id) : '',
      };
    }),

    WatchMessages: server.serverStream('WatchMessages', async (request, call) => {
      const agentId = inboxOwner(request.agentId);
      if (request.afterId !== '' && !STREAM_ID.test(request.afterId)) {
        throw new DomainError('invalid-request', {
          detail: 'after_id is not a message id.',
          fields: { parameter: 'after_id', expected: 'the id of a message you received, or empty to watch from now on' },
        });
      }
      const stop = new AbortController();
      call.on('cancelled', () => stop.abort());
      call.on('close', () => stop.abort());
      const signal = AbortSignal.any([stop.signal, server.drainSignal]);
      // Initial metadata tells the watcher it is positioned: every message sent from then on reaches it.
      await followFeed(store.inbox(agentId), request.afterId || undefined, (message) => call.write({ message: toProtoMessage(message) }), signal, {
        onPositioned: () => call.sendMetadata(new Metadata()),
      });
      if (!call.cancelled) call.end();
    }),
  };
}

export interface MessagingGrpcServerOptions extends MessagingHandlersOptions {
  log: Logger;
}

/** A gRPC server with the messaging service and health registered, not yet listening. */
export function createMessagingGrpcServer(options: MessagingGrpcServerOptions): GrpcServer {
  const server = new GrpcServer('messaging', options.log);
  const handlers = messagingHandlers(server, options);
  server.addService(MESSAGING_SERVICE_NAME, messagingProto().MessagingService.service, handlers as grpc.UntypedServiceImplementation);
  return server;
}
