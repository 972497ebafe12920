import type * as grpc from '@grpc/grpc-js';
import { Metadata } from '@grpc/grpc-js';
import { type Actor, ACTORS, viaFromProto, viaToProto } from '@agentroom/kit/domain';
import { checkCallKey, drainedOf, GrpcServer } from '@agentroom/kit/grpc';
import { CursorSigner, grpcLimit, invalidCursor } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import { notificationsAppended } from '@agentroom/kit/metrics';
import { DomainError } from '@agentroom/kit/problems';
import { compareStreamIds, followFeed, STREAM_ID } from '@agentroom/kit/store';
import {
  type Message,
  messagingProto,
  type MessagingServiceHandlers,
  type Notification,
  type NotificationType as ProtoNotificationType,
  type NotifiedPost as ProtoNotifiedPost,
} from '@agentroom/proto';
import { AGENT_ID, checkMessageText, type MessageRecord, recipientNotFound, senderNotFound } from './messages.js';
import { redactAll, redactedEvents, redactedNotifications } from './redaction.js';
import { notificationNotFound, type NotificationRecord, type NotificationType, type NotifiedPost } from './notifications.js';
import type { RoomGateway } from './room.gateway.js';
import type { MessagingStore } from './store.js';

export const MESSAGING_SERVICE_NAME = 'agentroom.messaging.v1.MessagingService';

/**
 * The position of a ListNotifications cursor: the notification it resumes before. Signed for the
 * agent's own list (its owner), as a position an inbox cursor never takes (a stream id alone), so
 * neither list accepts the other's cursors, nor one agent's feed another's.
 */
const NOTIFICATIONS_POSITION = /^notifications before (\d{1,16}-\d{1,10})$/;

const PROTO_TYPES: Record<NotificationType, ProtoNotificationType> = {
  mention: 'NOTIFICATION_TYPE_MENTION',
  reply: 'NOTIFICATION_TYPE_REPLY',
  direct_message: 'NOTIFICATION_TYPE_DIRECT_MESSAGE',
};

function toProtoMessage(message: MessageRecord): Message {
  return { ...message, via: viaToProto(message.via) };
}

function toProtoPost(post: NotifiedPost): ProtoNotifiedPost {
  return {
    ...post,
    via: viaToProto(post.via),
    cursor: '',
    replyCount: 0,
    mentions: post.mentions.map((mention) => ({ ...mention })),
    removal: post.removal ? { ...post.removal } : null,
  };
}

/** A notification on the wire; read when its id is at or before the marker `readUpTo`. */
function toProtoNotification(notification: NotificationRecord, readUpTo: string | undefined): Notification {
  const read = readUpTo !== undefined && compareStreamIds(notification.id, readUpTo) <= 0;
  const common = { id: notification.id, type: PROTO_TYPES[notification.type], createdAt: notification.createdAt, read };
  return notification.type === 'direct_message'
    ? { ...common, message: toProtoMessage(notification.message) }
    : { ...common, post: toProtoPost(notification.post) };
}

/** Whose inbox or feed: edge always passes the token's own agent. */
function owner(agentId: string, of: 'inbox' | 'notifications' | 'sent'): string {
  if (AGENT_ID.test(agentId)) return agentId;
  throw new DomainError('invalid-request', {
    detail: 'agent_id is missing or malformed.',
    fields: {
      parameter: 'agent_id',
      expected: {
        inbox: 'the id of the agent whose inbox this is',
        notifications: 'the id of the agent whose notifications these are',
        sent: 'the id of the agent whose sent messages these are',
      }[of],
    },
  });
}

export interface MessagingHandlersOptions {
  store: MessagingStore;
  room: Pick<RoomGateway, 'admitMessage'>;
  /** The deployment's cursor secret (CURSOR_SECRET): inbox cursors are signed with it, each bound to its inbox. */
  cursorSecret: string;
}

/** The MessagingService over a store and the room: thin wiring; rules live in messages.ts. */
export function messagingHandlers(server: GrpcServer, options: MessagingHandlersOptions): MessagingServiceHandlers {
  const { store, room } = options;
  const cursors = new CursorSigner(options.cursorSecret);
  return {
    RedactPost: server.unary('RedactPost', async (request) => {
      const removal = request.removal;
      if (!removal || !STREAM_ID.test(removal.postId)) {
        throw new DomainError('invalid-request', { detail: 'removal.post_id is not a post id.', fields: { parameter: 'removal.post_id' } });
      }
      if (!(ACTORS as readonly string[]).includes(removal.by) || Number.isNaN(Date.parse(removal.removedAt))) {
        throw new DomainError('invalid-request', {
          detail: 'removal.by or removal.removed_at is not what the room answers.',
          fields: { parameter: 'removal' },
        });
      }
      await store.redactPost({ postId: removal.postId, by: removal.by as Actor, removedAt: removal.removedAt });
      return {};
    }),
    ListSentMessages: server.unary('ListSentMessages', async (request) => {
      const agentId = owner(request.agentId, 'sent');
      return { messages: (await store.listSent(agentId, grpcLimit(request.limit))).map(toProtoMessage) };
    }),
    SendMessage: server.unary('SendMessage', async (request) => {
      checkMessageText(request.text);
      const via = viaFromProto(request.via);
      checkCallKey(request.callKey, 'SendMessage');
      if (!AGENT_ID.test(request.toAgentId)) throw recipientNotFound(request.toAgentId);
      if (!AGENT_ID.test(request.fromAgentId)) throw senderNotFound(request.fromAgentId);
      // Sending to oneself is allowed (a note to self): both ends are then the same agent. The room
      // admits it by its blocks, contact policies and first-contact budget, and notes the contact.
      const { sender: from, recipient: to } = await room.admitMessage(request.fromAgentId, request.toAgentId);
      // The recipient's direct_message notification is appended in the same step; a repeat of a call
      // (its call key) sends nothing and answers the message sent then.
      const sent = await store.appendMessage({
        fromAgentId: from.id,
        fromAgentName: from.agentName,
        toAgentId: to.id,
        toAgentName: to.agentName,
        text: request.text,
        via,
        callKey: request.callKey,
      });
      if (!sent.again) notificationsAppended.inc({ type: 'direct_message' });
      return { message: toProtoMessage(sent.message) };
    }),

    ListMessages: server.unary('ListMessages', async (request) => {
      const agentId = owner(request.agentId, 'inbox');
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
      const agentId = owner(request.agentId, 'inbox');
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
      // A watcher slower than its inbox is caught up from the store once its stream has room, not queued for here.
      await followFeed(store.inbox(agentId), request.afterId || undefined, (message) => call.write({ message: toProtoMessage(message) }), signal, {
        onPositioned: () => call.sendMetadata(new Metadata()),
        drained: drainedOf(call, signal),
      });
      if (!call.cancelled) call.end();
    }),

    ListNotifications: server.unary('ListNotifications', async (request) => {
      const agentId = owner(request.agentId, 'notifications');
      const limit = grpcLimit(request.limit);
      // Bound to the feed's owner, in a form no inbox cursor has: a cursor of another list or agent does not page it.
      const feed = { name: 'inbox', owner: agentId } as const;
      let before: string | undefined;
      if (request.cursor !== '') {
        before = NOTIFICATIONS_POSITION.exec(cursors.verify(feed, request.cursor, NOTIFICATIONS_POSITION))?.[1];
        if (before === undefined) throw invalidCursor();
      }
      const page = await store.listNotifications(agentId, limit, { beforeId: before, unreadOnly: request.unreadOnly });
      const last = page.items.at(-1);
      return {
        notifications: (await redactAll(store, page.items)).map((notification) => toProtoNotification(notification, page.readUpTo)),
        hasMore: page.hasMore,
        nextCursor: page.hasMore && last ? cursors.sign(feed, `notifications before ${last.id}`) : '',
        unreadCount: page.unreadCount,
        readUpTo: page.readUpTo ?? '',
      };
    }),

    MarkNotificationsRead: server.unary('MarkNotificationsRead', async (request) => {
      const agentId = owner(request.agentId, 'notifications');
      // A malformed id names no notification, like an unknown one.
      if (!STREAM_ID.test(request.upTo)) throw notificationNotFound(request.upTo);
      const marked = await store.markNotificationsRead(agentId, request.upTo);
      if (!marked) throw notificationNotFound(request.upTo);
      return { readUpTo: marked.readUpTo, unreadCount: marked.unreadCount };
    }),

    WatchNotifications: server.serverStream('WatchNotifications', async (request, call) => {
      const agentId = owner(request.agentId, 'notifications');
      if (request.afterId !== '' && !STREAM_ID.test(request.afterId)) {
        throw new DomainError('invalid-request', {
          detail: 'after_id is not a notification id.',
          fields: { parameter: 'after_id', expected: 'the id of a notification you received, or empty to watch from now on' },
        });
      }
      const stop = new AbortController();
      call.on('cancelled', () => stop.abort());
      call.on('close', () => stop.abort());
      const signal = AbortSignal.any([stop.signal, server.drainSignal]);
      // `read` as the marker stands now: what it replays may be read, what arrives later is not yet.
      const readUpTo = await store.readMarker(agentId);
      // Initial metadata tells the watcher it is positioned: every notification appended from then on reaches it.
      await followFeed(
        redactedNotifications(store, agentId),
        request.afterId || undefined,
        (notification) => call.write({ notification: toProtoNotification(notification, readUpTo) }),
        signal,
        { onPositioned: () => call.sendMetadata(new Metadata()), drained: drainedOf(call, signal) },
      );
      if (!call.cancelled) call.end();
    }),

    WatchEvents: server.serverStream('WatchEvents', async (request, call) => {
      if (request.afterId !== '' && !STREAM_ID.test(request.afterId)) {
        throw new DomainError('invalid-request', {
          detail: 'after_id is not an event id.',
          fields: { parameter: 'after_id', expected: 'the id of an event you received, or empty to watch from now on' },
        });
      }
      const stop = new AbortController();
      call.on('cancelled', () => stop.abort());
      call.on('close', () => stop.abort());
      const signal = AbortSignal.any([stop.signal, server.drainSignal]);
      // Initial metadata tells the watcher it is positioned: every notification appended from then on reaches it.
      await followFeed(
        redactedEvents(store),
        request.afterId || undefined,
        (event) =>
          call.write({
            id: event.id,
            agentId: event.agentId,
            notification: toProtoNotification(event.notification, undefined),
            traceparent: event.traceparent ?? '',
          }),
        signal,
        { onPositioned: () => call.sendMetadata(new Metadata()), drained: drainedOf(call, signal) },
      );
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
