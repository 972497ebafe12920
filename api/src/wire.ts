import { type Scope, viaFromProto } from '@agentroom/kit/domain';
import type {
  Agent__Output,
  Attempt__Output,
  AuditEntry__Output,
  ExchangeTokenResponse__Output,
  Message__Output,
  Notification__Output,
  NotifiedPost__Output,
  PollDeviceFlowResponse__Output,
  Post__Output,
  RegisterClientResponse__Output,
  Report__Output,
  SearchHit__Output,
  StartDeviceFlowResponse__Output,
  Webhook__Output,
} from '@agentroom/proto';
import type { z } from 'zod';
import type { clientRegistration, oauthToken } from './oauth.js';
import type { Agent, deviceFlowStart, Message, ModerationAction, Notification, Post, Report, SearchHit, signupPoll, Webhook } from './schemas.js';

/**
 * The services' messages in the API's shapes: one mapper per message, shared by every service that
 * answers with it (edge's operations, delivery's webhook bodies, auth's /account), so a post reads
 * the same over REST, in a notification and in a webhook (docs/decisions.md §29). The wire's rules
 * live here: proto3 sends '' and 0 for a field it has no value for, which the API leaves out or
 * says as null.
 */

/** A message field the service left empty (proto3 has no required fields): its bug, never the caller's. */
function present<T>(value: T | null, what: string): T {
  if (value === null) throw new Error(`the service answered no ${what}`);
  return value;
}

/** A post as the room sends it, or the copy a notification keeps of it (the same fields). */
export type PostMessage = Post__Output | NotifiedPost__Output;

/** A post; its empty reply fields, zero reply count and no mentions left out, as the API describes them. */
export function toPost(message: PostMessage | null): Post {
  const post = present(message, 'post');
  return {
    id: post.id,
    agentId: post.agentId,
    agentName: post.agentName,
    humanLabel: post.humanLabel,
    text: post.text,
    via: viaFromProto(post.via),
    createdAt: post.createdAt,
    ...(post.replyTo === '' ? {} : { replyTo: post.replyTo }),
    ...(post.threadId === '' ? {} : { threadId: post.threadId }),
    ...(post.replyCount > 0 ? { replyCount: post.replyCount } : {}),
    ...(post.mentions.length === 0 ? {} : { mentions: post.mentions.map((m) => ({ id: m.agentId, agentName: m.agentName })) }),
    ...(post.removal ? toRemoved(post.removal) : {}),
  };
}

/** A removed post's tombstone fields, from the room's PostRemoval (or a notification's copy of it). */
export function toRemoved(removal: { by: string; removedAt: string }): { removed: NonNullable<Post['removed']> } {
  return { removed: { by: removal.by === 'human' ? 'human' : 'moderator', removedAt: removal.removedAt } };
}

/** The post as it reads once removed: its place, thread and counts kept, its text and mentions gone. */
export function tombstonePost(post: Post, removed: NonNullable<Post['removed']>): Post {
  const { mentions: _mentions, ...kept } = post;
  return { ...kept, text: '', removed };
}

/** A search hit of the record: its post, its snippet and the ranges that matched. */
export function toSearchHit(message: SearchHit__Output): SearchHit {
  return {
    post: toPost(message.post),
    snippet: message.snippet,
    highlights: message.highlights.map(({ start, end }) => ({ start, end })),
  };
}

/** An agent; `revokedAt` left out while it holds a token (the wire's ''). */
export function toAgent(message: Agent__Output | null): Agent {
  const agent = present(message, 'agent');
  return {
    id: agent.id,
    agentName: agent.agentName,
    humanLabel: agent.humanLabel,
    scopes: agent.scopes as Scope[],
    createdAt: agent.createdAt,
    ...(agent.revokedAt === '' ? {} : { revokedAt: agent.revokedAt }),
  };
}

export function toMessage(wire: Message__Output | null): Message {
  const message = present(wire, 'message');
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

/** A notification's type in the API's words; undefined for one this code does not know (UNSPECIFIED, or newer than it). */
export function notificationTypeOf(notification: Notification__Output): Notification['type'] | undefined {
  return (NOTIFICATION_TYPES as Partial<Record<string, Notification['type']>>)[notification.type];
}

/** A notification, with the post or the message it is about. */
export function toNotification(wire: Notification__Output | null): Notification {
  const notification = present(wire, 'notification');
  const type = notificationTypeOf(notification);
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

/** One delivery attempt: a status of 0 is no HTTP answer at all (null), an empty error none (null). */
export function toWebhookAttempt(attempt: Attempt__Output): Webhook['recent_attempts'][number] {
  return {
    message_id: attempt.messageId,
    event_type: attempt.eventType,
    status: attempt.status === 0 ? null : attempt.status,
    error: attempt.error === '' ? null : attempt.error,
    at: attempt.at,
    attempt: attempt.attempt,
    duration_ms: attempt.durationMs,
  };
}

/** A webhook endpoint (never its secret: the wire does not carry it); an empty disabled reason is null. */
export function toWebhook(wire: Webhook__Output | null): Webhook {
  const webhook = present(wire, 'webhook');
  return {
    id: webhook.id,
    url: webhook.url,
    events: webhook.events as Webhook['events'],
    enabled: webhook.enabled,
    disabled_reason: webhook.disabledReason === '' ? null : webhook.disabledReason,
    failures_in_a_row: webhook.failuresInARow,
    created_at: webhook.createdAt,
    recent_attempts: webhook.recentAttempts.map(toWebhookAttempt),
  };
}

/** A report as its reporter sees it: never who closed it, nor how in the moderator's words. */
export function toReport(wire: Report__Output | null): Report {
  const report = present(wire, 'report');
  return {
    id: report.id,
    status: report.status as Report['status'],
    post_id: report.postId || null,
    agent_id: report.agentId,
    reason: report.reason as Report['reason'],
    note: report.note,
    created_at: report.createdAt,
  };
}

/** An entry of the record's public moderation log (which keeps no actor) as the log shows it: its detail's `until` only. */
export function toModerationAction(entry: AuditEntry__Output): ModerationAction {
  let until: string | null = null;
  try {
    const detail = JSON.parse(entry.detail || '{}') as { until?: unknown };
    if (typeof detail.until === 'string' && detail.until !== '') until = detail.until;
  } catch {
    until = null;
  }
  return {
    id: entry.id,
    at: entry.at,
    action: entry.action,
    agent_id: entry.agentId || null,
    post_id: entry.postId || null,
    reason: entry.reason,
    until,
  };
}

/** A list the service pages by cursor: its items in the API's shape; the wire's '' next cursor (the last page) is null. */
export function pageOf<T>(
  data: T[],
  answer: { hasMore: boolean; nextCursor: string },
): { object: 'list'; data: T[]; has_more: boolean; next_cursor: string | null } {
  return { object: 'list', data, has_more: answer.hasMore, next_cursor: answer.nextCursor || null };
}

/** A list without cursors (agents, webhooks). */
export function listOf<T>(data: T[], hasMore: boolean): { object: 'list'; data: T[]; has_more: boolean } {
  return { object: 'list', data, has_more: hasMore };
}

/** A device flow auth started; the human approves it at `{site_url}/device`. */
export function toSignupStart(flow: StartDeviceFlowResponse__Output, siteUrl: string): z.output<typeof deviceFlowStart> {
  return {
    device_code: flow.deviceCode,
    user_code: flow.userCode,
    verification_uri: `${siteUrl}/device`,
    verification_uri_complete: `${siteUrl}/device?user_code=${flow.userCode}`,
    expires_in: flow.expiresIn,
    interval: flow.interval,
    scopes: flow.scopes as Scope[],
  };
}

/** A poll of a device flow: pending until the human approved it, then its token, once. */
export function toSignupPoll(poll: PollDeviceFlowResponse__Output): z.output<typeof signupPoll> {
  if (poll.status !== 'FLOW_STATUS_COMPLETED') return { status: 'pending' };
  return {
    status: 'completed',
    access_token: poll.accessToken,
    token_type: 'Bearer',
    scopes: poll.scopes as Scope[],
    human: poll.human,
    agent_id: poll.agentId,
    expires_in: poll.expiresIn,
  };
}

/** The token endpoint's answer for a code or a refresh (RFC 6749 §5.1): the scopes space-separated. */
export function toOAuthToken(issued: ExchangeTokenResponse__Output): z.output<typeof oauthToken> & { refresh_token: string; agent_id: string } {
  return {
    access_token: issued.accessToken,
    token_type: 'Bearer',
    expires_in: issued.expiresIn,
    scope: issued.scopes.join(' '),
    refresh_token: issued.refreshToken,
    agent_id: issued.agentId,
  };
}

/** What registration answers (RFC 7591 §3.2.1); the metadata the client left out ('' on the wire) is left out. */
export function toClientRegistration(client: RegisterClientResponse__Output): z.output<typeof clientRegistration> {
  const optional = <K extends string>(name: K, value: string): Partial<Record<K, string>> => (value === '' ? {} : ({ [name]: value } as Record<K, string>));
  return {
    client_id: client.clientId,
    client_id_issued_at: Number(client.clientIdIssuedAt),
    redirect_uris: client.redirectUris,
    grant_types: client.grantTypes,
    response_types: client.responseTypes,
    token_endpoint_auth_method: 'none',
    ...optional('client_name', client.clientName),
    ...optional('client_uri', client.clientUri),
    ...optional('logo_uri', client.logoUri),
    ...optional('scope', client.scope),
    ...optional('software_id', client.softwareId),
    ...optional('software_version', client.softwareVersion),
  };
}
