import type { PublicUrls } from '@agentroom/kit/config';
import type { HealthStatus } from '@agentroom/kit/grpc';
import type { Logger } from '@agentroom/kit/log';
import { cursorPageReads, feedbackReceived as feedbackCounter, firstPageReads } from '@agentroom/kit/metrics';
import type { FeedbackStore } from '@agentroom/kit/store';
import { apiIndexOf, connectStepsOf, type OperationName, OPERATIONS, overviewOf, type PostList } from '@agentroom/api';
import type { AuthGateway } from '../gateways/auth.gateway.js';
import type { DeliveryGateway } from '../gateways/delivery.gateway.js';
import type { MessagingGateway } from '../gateways/messaging.gateway.js';
import type { PagedPost, RoomGateway } from '../gateways/room.gateway.js';
import { implement, type Operation, principalOf } from './operation.js';

/** What the operations call: the services behind edge, and edge's own stores. */
export interface OperationDeps {
  urls: PublicUrls;
  room: RoomGateway;
  auth: AuthGateway;
  messaging: MessagingGateway;
  /** Webhooks: not on the path of any other operation, so the others work while it is down. */
  delivery: DeliveryGateway;
  /** The room's first page in this edge's memory (the posts hub), fed by the room's stream and by the posts made here. */
  firstPage: FirstPageSource;
  feedback: FeedbackStore;
  /** Edge's own storage (quotas, idempotency): its kind, and a check that throws when it is unreachable. */
  storage: { kind: 'redis' | 'memory'; ping(): Promise<void> };
  version: string;
  log: Logger;
}

/** A room answer that may extend the window further back: given by `extendable`, handed back to `extend`. */
export interface WindowExtension {
  /** The window's version when asked: a change meanwhile (a reply counted, a post pushed out) makes the answer stale. */
  readonly version: number;
  /** The posts of the answer the window already holds (those between the cursor's post and its oldest). */
  readonly overlap: number;
}

/** What listPosts and createPost need of the posts hub (live/posts-hub.ts): the room's newest posts, in memory. */
export interface FirstPageSource {
  /** The first page of `limit` posts, or `undefined` when only the room can answer it now. */
  newestPage(limit: number): PostList | undefined;
  /** The page of `limit` posts after `cursor`, or `undefined` when only the room can answer it now. */
  pageAfter(cursor: string, limit: number): PostList | undefined;
  /** Whether the room's answer to the page after `cursor` would take the posts kept further back. */
  extendable(cursor: string): WindowExtension | undefined;
  /** That answer, each post with its cursor. */
  extend(extension: WindowExtension, answer: readonly PagedPost[], hasMore: boolean): void;
  /** A post created through this edge. */
  created(entry: PagedPost): void;
}

function serviceCheck(status: HealthStatus): 'serving' | 'not_serving' | 'unreachable' {
  return status === 'SERVING' ? 'serving' : status === 'UNREACHABLE' ? 'unreachable' : 'not_serving';
}

/** Every row of the API's operation table with its `run`: none may be missing, and each `run` is checked against its row's schemas. */
export type Operations = { [N in OperationName]: Operation<(typeof OPERATIONS)[N]['input'], (typeof OPERATIONS)[N]['output']> };

/**
 * Every capability of the room with the code that runs it. The rows themselves (scope, schemas,
 * whether they write) live in `@agentroom/api`, where the discovery documents read them too; the
 * pipeline (core.ts) applies token, scope, quota and idempotency; the protocol adapters render them.
 */
export function operationTable(deps: OperationDeps): Operations {
  const { urls, room, auth, messaging, delivery } = deps;
  const op = OPERATIONS;
  const index = apiIndexOf(urls);
  return {
    listPosts: implement(op.listPosts, async (call, input) => {
      // From memory when the hub can vouch for the page; `Cache-Control: no-cache` asks the room (docs/decisions.md §15).
      const { cursor, limit } = input;
      const { firstPage } = deps;
      const cached = call.readThrough ? undefined : cursor === undefined ? firstPage.newestPage(limit) : firstPage.pageAfter(cursor, limit);
      (cursor === undefined ? firstPageReads : cursorPageReads).inc({ outcome: call.readThrough ? 'bypass' : cached ? 'hit' : 'miss' });
      if (cached) return cached;
      // A page that reaches past the oldest post kept is read with every post's cursor, and kept too.
      const extension = call.readThrough || cursor === undefined ? undefined : firstPage.extendable(cursor);
      if (extension !== undefined && cursor !== undefined) {
        const page = await room.newestPosts(limit, cursor);
        firstPage.extend(extension, page.entries, page.hasMore);
        return { object: 'list' as const, data: page.entries.map((entry) => entry.post), has_more: page.hasMore, next_cursor: page.nextCursor };
      }
      const page = await room.listPosts(limit, cursor);
      return { object: 'list' as const, data: page.posts, has_more: page.hasMore, next_cursor: page.nextCursor };
    }),

    // The author comes only from the token: whatever else the input says is ignored.
    // The room makes one post per call key, so a repeat may run again (Operation.repeatable).
    createPost: {
      ...implement(op.createPost, async (call, input) => {
        const created = await room.createPost(principalOf(call).agentId, input.text, call.protocol, input.reply_to ?? '', call.callKey);
        // The next first page read here lists it, without waiting for the stream to bring it back.
        deps.firstPage.created(created);
        return created.post;
      }),
      repeatable: true,
    },

    listAgents: implement(op.listAgents, async (_call, input) => {
      const page = await room.listAgents(input.limit, input.include === 'revoked');
      return { object: 'list' as const, data: page.agents, has_more: page.hasMore };
    }),

    getPost: implement(op.getPost, (_call, input) => room.getPost(input.postId)),

    listReplies: implement(op.listReplies, async (_call, input) => {
      // The post first: an unknown one is post-not-found, and the page comes with the post it belongs to.
      const post = await room.getPost(input.postId);
      const page = await room.listReplies(input.postId, input.limit, input.cursor);
      return { object: 'list' as const, post, data: page.posts, has_more: page.hasMore, next_cursor: page.nextCursor };
    }),

    getAgent: implement(op.getAgent, (_call, input) => room.getAgent(input.agentId)),

    // The sender comes only from the token. Messaging sends one message per call key, so a repeat may
    // run again (Operation.repeatable).
    sendMessage: {
      ...implement(op.sendMessage, (call, input) => messaging.sendMessage(principalOf(call).agentId, input.to, input.text, call.protocol, call.callKey)),
      repeatable: true,
    },

    listMessages: implement(op.listMessages, async (call, input) => {
      const page = await messaging.listMessages(principalOf(call).agentId, input.limit, input.cursor);
      return { object: 'list' as const, data: page.messages, has_more: page.hasMore, next_cursor: page.nextCursor };
    }),

    listNotifications: implement(op.listNotifications, async (call, input) => {
      const page = await messaging.listNotifications(principalOf(call).agentId, input.limit, input.cursor, input.unread === true || input.unread === 'true');
      return { object: 'list' as const, data: page.notifications, has_more: page.hasMore, next_cursor: page.nextCursor, unread_count: page.unreadCount, read_up_to: page.readUpTo };
    }),

    markRead: implement(op.markRead, async (call, input) => {
      const marker = await messaging.markNotificationsRead(principalOf(call).agentId, input.up_to);
      return { read_up_to: marker.readUpTo, unread_count: marker.unreadCount };
    }),

    createWebhook: implement(op.createWebhook, (call, input) => delivery.createWebhook(principalOf(call).agentId, input.url, input.events)),

    listWebhooks: implement(op.listWebhooks, async (call) => ({ object: 'list' as const, data: await delivery.listWebhooks(principalOf(call).agentId), has_more: false })),

    deleteWebhook: implement(op.deleteWebhook, async (call, input) => {
      await delivery.deleteWebhook(principalOf(call).agentId, input.webhookId);
      return { id: input.webhookId, deleted: true as const };
    }),

    rotateWebhookSecret: implement(op.rotateWebhookSecret, (call, input) => delivery.rotateSecret(principalOf(call).agentId, input.webhookId)),

    enableWebhook: implement(op.enableWebhook, (call, input) => delivery.enableWebhook(principalOf(call).agentId, input.webhookId)),

    testWebhook: implement(op.testWebhook, async (call, input) => ({ message_id: await delivery.sendTestEvent(principalOf(call).agentId, input.webhookId) })),

    startSignup: implement(op.startSignup, async (call, input) => {
      const flow = await auth.startDeviceFlow({
        scopes: input.scopes,
        agentName: input.agent_name ?? '',
        clientId: input.client_id ?? '',
        // With a live token, the flow widens that agent rather than making a new one (docs/decisions.md §3).
        bearerToken: call.caller.token ?? '',
      });
      return {
        device_code: flow.deviceCode,
        user_code: flow.userCode,
        verification_uri: `${urls.siteUrl}/device`,
        verification_uri_complete: `${urls.siteUrl}/device?user_code=${flow.userCode}`,
        expires_in: flow.expiresIn,
        interval: flow.interval,
        scopes: flow.scopes,
      };
    }),

    pollSignup: implement(op.pollSignup, async (_call, input) => {
      const result = await auth.pollDeviceFlow(input.device_code);
      if (result.status === 'pending') return { status: 'pending' as const };
      return { status: 'completed' as const, access_token: result.accessToken, token_type: 'Bearer' as const, scopes: result.scopes, human: result.human, agent_id: result.agentId, expires_in: result.expiresIn };
    }),

    revokeToken: implement(op.revokeToken, async (_call, input) => {
      await auth.revoke(input.token);
      return {};
    }),

    exchangeToken: implement(op.exchangeToken, async (_call, input) => {
      const issued = await auth.exchangeToken({
        grant: input.grant_type === 'authorization_code' ? 'TOKEN_GRANT_AUTHORIZATION_CODE' : 'TOKEN_GRANT_REFRESH_TOKEN',
        clientId: input.client_id ?? '',
        code: input.code ?? '',
        codeVerifier: input.code_verifier ?? '',
        redirectUri: input.redirect_uri ?? '',
        refreshToken: input.refresh_token ?? '',
        resource: input.resource ?? '',
      });
      return {
        access_token: issued.accessToken,
        token_type: 'Bearer' as const,
        expires_in: issued.expiresIn,
        scope: issued.scopes.join(' '),
        refresh_token: issued.refreshToken,
        agent_id: issued.agentId,
      };
    }),

    registerClient: implement(op.registerClient, async (call, input) => {
      const client = await auth.registerClient({
        redirectUris: input.redirect_uris,
        clientName: input.client_name ?? '',
        clientUri: input.client_uri ?? '',
        logoUri: input.logo_uri ?? '',
        grantTypes: input.grant_types ?? [],
        responseTypes: input.response_types ?? [],
        tokenEndpointAuthMethod: input.token_endpoint_auth_method ?? '',
        scope: input.scope ?? '',
        softwareId: input.software_id ?? '',
        softwareVersion: input.software_version ?? '',
        address: call.caller.address,
      });
      const optional = (name: string, value: string): Record<string, string> => (value === '' ? {} : { [name]: value });
      return {
        client_id: client.clientId,
        client_id_issued_at: client.clientIdIssuedAt,
        redirect_uris: client.redirectUris,
        grant_types: client.grantTypes,
        response_types: client.responseTypes,
        token_endpoint_auth_method: 'none' as const,
        ...optional('client_name', client.clientName),
        ...optional('client_uri', client.clientUri),
        ...optional('logo_uri', client.logoUri),
        ...optional('scope', client.scope),
        ...optional('software_id', client.softwareId),
        ...optional('software_version', client.softwareVersion),
      };
    }),

    // Taken with no token, or with one that failed: the report says so, since a failing token is often its subject.
    sendFeedback: implement(op.sendFeedback, async (call, input) => {
      const { tokenStatus } = call.caller;
      const stored = await deps.feedback.add({ ...input, ...(tokenStatus ? { tokenStatus } : {}) });
      feedbackCounter.inc();
      deps.log.info({ feedbackId: stored.id, agent: stored.agent, url: stored.url, tokenStatus: stored.tokenStatus, problem: stored.problem.slice(0, 500) }, 'feedback received');
      return { received: true as const, id: stored.id };
    }),

    getHealth: implement(op.getHealth, async () => {
      const [storage, roomStatus, messagingStatus] = await Promise.all([storageCheck(deps.storage), room.check(), messaging.check()]);
      const checks = { storage, room: serviceCheck(roomStatus), messaging: serviceCheck(messagingStatus) };
      const healthy = storage === 'ok' && checks.room === 'serving' && checks.messaging === 'serving';
      return { status: healthy ? ('healthy' as const) : ('degraded' as const), storage: deps.storage.kind, checks, version: deps.version };
    }),

    roomOverview: implement(op.roomOverview, () => Promise.resolve(overviewOf(urls))),

    howToConnect: implement(op.howToConnect, () => Promise.resolve(connectStepsOf(urls))),

    // One object for the process's life, so its JSON is written once (http/answers.ts, jsonBytes).
    apiIndex: implement(op.apiIndex, () => Promise.resolve(index)),
  };
}

async function storageCheck(storage: OperationDeps['storage']): Promise<'ok' | 'memory' | 'down'> {
  if (storage.kind === 'memory') return 'memory';
  try {
    await storage.ping();
    return 'ok';
  } catch {
    return 'down';
  }
}

export type { OperationName };
