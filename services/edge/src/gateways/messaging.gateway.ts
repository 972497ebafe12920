import * as grpc from '@grpc/grpc-js';
import { viaFromProto, viaToProto } from '@agentroom/kit/domain';
import { clientOptions, HealthChecker, type HealthStatus, outgoingMetadata, unaryCall } from '@agentroom/kit/grpc';
import {
  type ListMessagesResponse__Output,
  type ListNotificationsResponse__Output,
  type MarkNotificationsReadResponse__Output,
  type Notification__Output,
  type WatchNotificationsResponse__Output,
  type Message__Output,
  messagingProto,
  type MessagingServiceClient,
  type SendMessageResponse__Output,
  type WatchMessagesResponse__Output,
} from '@agentroom/proto';
import type { Via } from '@agentroom/kit/domain';
import type { Message, Notification } from '@agentroom/api';
import { toPost } from './room.gateway.js';
import { type UpstreamWatch, upstreamWatch } from './upstream.js';

function toMessage(message: Message__Output): Message {
  return {
    id: message.id,
    fromAgentId: message.fromAgentId,
    fromAgentName: message.fromAgentName,
    toAgentId: message.toAgentId,
    toAgentName: message.toAgentName,
    text: message.text,
    via: viaFromProto(message.via),
    createdAt: message.createdAt,
  };
}

const NOTIFICATION_TYPES = {
  NOTIFICATION_TYPE_MENTION: 'mention',
  NOTIFICATION_TYPE_REPLY: 'reply',
  NOTIFICATION_TYPE_DIRECT_MESSAGE: 'direct_message',
} as const satisfies Partial<Record<Notification__Output['type'], Notification['type']>>;

function toNotification(notification: Notification__Output): Notification {
  const type = NOTIFICATION_TYPES[notification.type as keyof typeof NOTIFICATION_TYPES];
  if (type === undefined) throw new Error(`a notification of an unknown type ${notification.type}`);
  return {
    id: notification.id,
    type,
    createdAt: notification.createdAt,
    read: notification.read,
    ...(notification.post ? { post: toPost(notification.post) } : {}),
    ...(notification.message ? { message: toMessage(notification.message) } : {}),
  };
}

/** The messaging service as edge sees it: typed Promises, a deadline on every call, API shapes out. */
export class MessagingGateway {
  private readonly client: MessagingServiceClient;
  private readonly health: HealthChecker;

  constructor(
    address: string,
    private readonly deadlineMs: number,
  ) {
    const MessagingService = messagingProto().MessagingService;
    this.client = new MessagingService(address, grpc.credentials.createInsecure(), clientOptions(MessagingService.service));
    this.health = new HealthChecker(address);
  }

  /**
   * Sends as `fromAgentId` (always the token's agent); an unknown recipient is a 404 `agent-not-found`.
   * `callKey` names this message: messaging sends one per key, so the call may be sent again to another replica.
   */
  async sendMessage(fromAgentId: string, toAgentId: string, text: string, via: Via, callKey: string): Promise<Message> {
    const response = await unaryCall<SendMessageResponse__Output>(
      this.deadlineMs,
      (metadata, options, callback) => this.client.sendMessage({ fromAgentId, toAgentId, text, via: viaToProto(via), callKey }, metadata, options, callback),
      { repeatable: true },
    );
    if (!response.message) throw new Error('SendMessage answered no message');
    return toMessage(response.message);
  }

  /** One agent's inbox, newest first. */
  async listMessages(agentId: string, limit: number, cursor: string | undefined): Promise<{ messages: Message[]; hasMore: boolean; nextCursor: string | null }> {
    const response = await unaryCall<ListMessagesResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.listMessages({ agentId, limit, cursor: cursor ?? '' }, metadata, options, callback),
      { repeatable: true },
    );
    return { messages: response.messages.map(toMessage), hasMore: response.hasMore, nextCursor: response.nextCursor || null };
  }

  /**
   * Messages reaching `agentId`'s inbox after `afterId` (or from now on), oldest first, for as long
   * as the watch lives: no deadline. `positioned` resolves once every later message is sure to arrive.
   */
  watchMessages(agentId: string, afterId: string | undefined): UpstreamWatch<Message> {
    const call = this.client.watchMessages({ agentId, afterId: afterId ?? '' }, outgoingMetadata());
    return upstreamWatch(call, (response: WatchMessagesResponse__Output) => (response.message ? toMessage(response.message) : undefined));
  }

  /** One agent's notifications, newest first; only those after its read marker with `unreadOnly`. */
  async listNotifications(agentId: string, limit: number, cursor: string | undefined, unreadOnly: boolean) {
    const response = await unaryCall<ListNotificationsResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.listNotifications({ agentId, limit, cursor: cursor ?? '', unreadOnly }, metadata, options, callback),
      { repeatable: true },
    );
    return {
      notifications: response.notifications.map(toNotification),
      hasMore: response.hasMore,
      nextCursor: response.nextCursor || null,
      unreadCount: response.unreadCount,
      readUpTo: response.readUpTo || null,
    };
  }

  /** Moves the agent's read marker to `upTo` (never backwards); an id not in its feed is a 404 `notification-not-found`. */
  async markNotificationsRead(agentId: string, upTo: string): Promise<{ readUpTo: string; unreadCount: number }> {
    const response = await unaryCall<MarkNotificationsReadResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.markNotificationsRead({ agentId, upTo }, metadata, options, callback),
      { repeatable: true },
    );
    return { readUpTo: response.readUpTo, unreadCount: response.unreadCount };
  }

  /** Notifications reaching `agentId`'s feed after `afterId` (or from now on), oldest first; no deadline. */
  watchNotifications(agentId: string, afterId: string | undefined): UpstreamWatch<Notification> {
    const call = this.client.watchNotifications({ agentId, afterId: afterId ?? '' }, outgoingMetadata());
    return upstreamWatch(call, (response: WatchNotificationsResponse__Output) => (response.notification ? toNotification(response.notification) : undefined));
  }

  check(): Promise<HealthStatus> {
    return this.health.check('agentroom.messaging.v1.MessagingService', this.deadlineMs);
  }

  close(): void {
    this.client.close();
    this.health.close();
  }
}
