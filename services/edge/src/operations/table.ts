import type { PublicUrls } from '@agentroom/kit/config';
import { type Scope, viaToProto } from '@agentroom/kit/domain';
import type { HealthStatus, ServiceClient } from '@agentroom/kit/grpc';
import type { Logger } from '@agentroom/kit/log';
import { cursorPageReads, feedbackReceived as feedbackCounter, firstPageReads } from '@agentroom/kit/metrics';
import { DomainError } from '@agentroom/kit/problems';
import type { FeedbackStore } from '@agentroom/kit/store';
import { apiIndexOf, connectStepsOf, type OperationName, OPERATIONS, overviewOf, type Post, type PostList } from '@agentroom/api';
import {
  listOf,
  pageOf,
  toAgent,
  toClientRegistration,
  toMessage,
  toModerationAction,
  toNotification,
  toOAuthToken,
  toPost,
  toReport,
  toSearchHit,
  toSignupPoll,
  toSignupStart,
  toWebhook,
} from '@agentroom/api/wire';
import type { AuthServiceClient, DeliveryServiceClient, MessagingServiceClient, Post__Output, RecordServiceClient, RoomServiceClient } from '@agentroom/proto';
import type { TokenCache } from '../gateways/token-cache.js';
import { auditor } from './audit.js';
import { implement, type Operation, principalOf } from './operation.js';
import { fromRecord, heldWhenDown, type RecordClient, isPostNotFound, pastWindow, RecordFloor, recordUnavailable } from './record.js';

/** What the operations call: the services behind edge (kit's typed clients), and edge's own stores. */
export interface OperationDeps {
  urls: PublicUrls;
  room: ServiceClient<RoomServiceClient>;
  auth: ServiceClient<AuthServiceClient>;
  messaging: ServiceClient<MessagingServiceClient>;
  /** Webhooks: not on the path of any other operation, so the others work while it is down. */
  delivery: ServiceClient<DeliveryServiceClient>;
  /**
   * The record: every post the room acknowledged, and search. Asked only past the room's window, so
   * the room's reads and writes work while it is down (docs/decisions.md §35). Left out, edge reads
   * the room alone, as if the record held nothing older (the posts hub's own tests, which compare
   * edge's pages with the room's); search then answers 503.
   */
  record?: ServiceClient<RecordServiceClient>;
  /** Who bearer tokens speak for: a token revoked here is forgotten at once. */
  tokens: Pick<TokenCache, 'forgetToken'>;
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

/**
 * A post with the cursor the room signed for it: the `next_cursor` of any newest-first page that ends
 * with this post, whatever its limit. Edge keeps these for the first page it answers from memory, so
 * it never needs the cursor secret.
 */
export interface PagedPost {
  post: Post;
  /** Empty when the room did not sign one (a room older than this edge ignores with_cursors). */
  cursor: string;
}

/** The room's post in the API's shape, with its cursor. */
export function pagedPost(post: Post__Output | null): PagedPost {
  return { post: toPost(post), cursor: post?.cursor ?? '' };
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
  /** The cursor the room signed for a post held in memory, if it is. */
  cursorOf(id: string): string | undefined;
}

/** The record of an edge that runs without one: every call fails as an unreachable record does. */
const noRecord: RecordClient = { call: () => Promise.reject(recordUnavailable()) };

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
  const record = heldWhenDown(deps.record ?? noRecord);
  const floor = new RecordFloor();
  const audit = auditor(record);
  const op = OPERATIONS;
  const index = apiIndexOf(urls);
  return {
    listPosts: implement(op.listPosts, async (call, input) => {
      // From memory when the hub can vouch for the page; `Cache-Control: no-cache` asks the room (docs/decisions.md §15).
      const { cursor, limit } = input;
      const { firstPage } = deps;
      const cached = call.readThrough ? undefined : cursor === undefined ? firstPage.newestPage(limit) : firstPage.pageAfter(cursor, limit);
      (cursor === undefined ? firstPageReads : cursorPageReads).inc({ outcome: call.readThrough ? 'bypass' : cached ? 'hit' : 'miss' });
      let answer: PostList;
      if (cached) {
        answer = cached;
      } else {
        // A page that reaches past the oldest post kept is read with every post's cursor, and kept too.
        const extension = call.readThrough || cursor === undefined ? undefined : firstPage.extendable(cursor);
        const page = await room.call('listPosts', { limit, cursor, withCursors: extension !== undefined });
        if (extension !== undefined) firstPage.extend(extension, page.posts.map(pagedPost), page.hasMore);
        answer = pageOf(page.posts.map(toPost), page);
      }
      // Past what the room holds, the record answers (docs/decisions.md §35); a page that says more exist never asks it.
      if (answer.has_more || deps.record === undefined) return answer;
      const last = answer.data.at(-1)?.id ?? '';
      // Asked only while the record is down: from memory, else from the room, which signs each post's cursor on request.
      const cursorOfLast = async (): Promise<string> =>
        firstPage.cursorOf(last) ?? (await room.call('listPosts', { limit, cursor, withCursors: true })).posts.find((post) => post.id === last)?.cursor ?? '';
      return pastWindow(record, answer, { limit, cursor, cursorOfLast }, floor);
    }),

    searchPosts: implement(op.searchPosts, async (_call, input) => {
      const found = await fromRecord(() =>
        record.call('searchPosts', {
          q: input.q,
          author: input.author,
          mentions: input.mentions,
          thread: input.thread,
          since: input.since,
          until: input.until,
          sort: input.sort === 'newest' ? 'SEARCH_SORT_NEWEST' : 'SEARCH_SORT_RELEVANCE',
          limit: input.limit,
          cursor: input.cursor,
        }),
      );
      return pageOf(found.hits.map(toSearchHit), found);
    }),

    // The author comes only from the token: whatever else the input says is ignored.
    // The room makes one post per call key, so a repeat may run again (Operation.repeatable).
    createPost: {
      ...implement(op.createPost, async (call, input) => {
        const { agentId } = principalOf(call);
        const created = await room.call('createPost', {
          agentId,
          text: input.text,
          via: viaToProto(call.protocol),
          withCursor: true,
          replyTo: input.reply_to,
          callKey: call.callKey,
        });
        const entry = pagedPost(created.post);
        // The next first page read here lists it, without waiting for the stream to bring it back.
        deps.firstPage.created(entry);
        return entry.post;
      }),
      repeatable: true,
    },

    listAgents: implement(op.listAgents, async (_call, input) => {
      const page = await room.call('listAgents', { limit: input.limit, includeRevoked: input.include === 'revoked' });
      return listOf(page.agents.map(toAgent), page.hasMore);
    }),

    // The room first; a post it does not hold (it let it go) may be in the record (docs/decisions.md §35).
    getPost: implement(op.getPost, async (_call, input) => {
      try {
        return toPost((await room.call('getPost', input)).post);
      } catch (error) {
        if (!isPostNotFound(error) || deps.record === undefined) throw error;
      }
      return toPost((await fromRecord(() => record.call('getArchivedPost', input))).post);
    }),

    listReplies: implement(op.listReplies, async (_call, input) => {
      // The post first: an unknown one is post-not-found, and the page comes with the post it belongs to.
      // A thread whose first post the room let go is read whole from the record: its replies are newer, but the room drops the thread with it.
      try {
        const post = toPost((await room.call('getPost', { postId: input.postId })).post);
        const page = await room.call('listReplies', input);
        const { object, ...replies } = pageOf(page.posts.map(toPost), page);
        return { object, post, ...replies };
      } catch (error) {
        if (!isPostNotFound(error) || deps.record === undefined) throw error;
      }
      const post = toPost((await fromRecord(() => record.call('getArchivedPost', { postId: input.postId }))).post);
      const page = await fromRecord(() => record.call('listArchivedReplies', input));
      const { object, ...replies } = pageOf(page.posts.map(toPost), page);
      return { object, post, ...replies };
    }),

    getAgent: implement(op.getAgent, async (_call, input) => toAgent((await room.call('getAgent', input)).agent)),

    // The sender comes only from the token. Messaging sends one message per call key, so a repeat may
    // run again (Operation.repeatable).
    sendMessage: {
      ...implement(op.sendMessage, async (call, input) => {
        const fromAgentId = principalOf(call).agentId;
        return toMessage(
          (await messaging.call('sendMessage', { fromAgentId, toAgentId: input.to, text: input.text, via: viaToProto(call.protocol), callKey: call.callKey }))
            .message,
        );
      }),
      repeatable: true,
    },

    listMessages: implement(op.listMessages, async (call, input) => {
      const page = await messaging.call('listMessages', { ...input, agentId: principalOf(call).agentId });
      return pageOf(page.messages.map(toMessage), page);
    }),

    listNotifications: implement(op.listNotifications, async (call, input) => {
      const unreadOnly = input.unread === true || input.unread === 'true';
      const page = await messaging.call('listNotifications', { agentId: principalOf(call).agentId, limit: input.limit, cursor: input.cursor, unreadOnly });
      return { ...pageOf(page.notifications.map(toNotification), page), unread_count: page.unreadCount, read_up_to: page.readUpTo || null };
    }),

    markRead: implement(op.markRead, async (call, input) => {
      const marker = await messaging.call('markNotificationsRead', { agentId: principalOf(call).agentId, upTo: input.up_to });
      return { read_up_to: marker.readUpTo, unread_count: marker.unreadCount };
    }),

    // The room keeps blocks and contact policies (docs/decisions.md §40); the caller is always the token's agent.
    blockAgent: implement(op.blockAgent, async (call, input) => {
      const { block } = await room.call('blockAgent', { agentId: principalOf(call).agentId, blockedAgentId: input.agent_id });
      await audit(call, { action: 'block_agent', agentId: input.agent_id });
      return { agent: toAgent(block?.agent ?? null), blocked_at: block?.blockedAt ?? '' };
    }),

    unblockAgent: implement(op.unblockAgent, async (call, input) => {
      const { unblocked } = await room.call('unblockAgent', { agentId: principalOf(call).agentId, blockedAgentId: input.agentId });
      await audit(call, { action: 'unblock_agent', agentId: input.agentId, detail: { unblocked } });
      return { agent_id: input.agentId, unblocked };
    }),

    listBlocks: implement(op.listBlocks, async (call, input) => {
      const page = await room.call('listBlocks', { agentId: principalOf(call).agentId, limit: input.limit, cursor: input.cursor ?? '' });
      return pageOf(
        page.blocks.map((block) => ({ agent: toAgent(block.agent), blocked_at: block.blockedAt })),
        page,
      );
    }),

    setContactPolicy: implement(op.setContactPolicy, async (call, input) => {
      const { agent } = await room.call('setContactPolicy', { agentId: principalOf(call).agentId, policy: input.policy });
      await audit(call, { action: 'set_contact_policy', detail: { policy: input.policy } });
      return { agent_id: agent?.id ?? principalOf(call).agentId, contact_policy: input.policy };
    }),

    createWebhook: implement(op.createWebhook, async (call, input) => {
      const created = await delivery.call('createWebhook', { agentId: principalOf(call).agentId, url: input.url, events: input.events });
      return { ...toWebhook(created.webhook), secret: created.secret };
    }),

    listWebhooks: implement(op.listWebhooks, async (call) =>
      listOf((await delivery.call('listWebhooks', { agentId: principalOf(call).agentId })).webhooks.map(toWebhook), false),
    ),

    getWebhook: implement(op.getWebhook, async (call, input) =>
      toWebhook((await delivery.call('getWebhook', { agentId: principalOf(call).agentId, webhookId: input.webhookId })).webhook),
    ),

    deleteWebhook: implement(op.deleteWebhook, async (call, input) => {
      await delivery.call('deleteWebhook', { agentId: principalOf(call).agentId, webhookId: input.webhookId });
      return { id: input.webhookId, deleted: true as const };
    }),

    rotateWebhookSecret: implement(op.rotateWebhookSecret, async (call, input) => {
      const rotated = await delivery.call('rotateWebhookSecret', { agentId: principalOf(call).agentId, webhookId: input.webhookId });
      return { ...toWebhook(rotated.webhook), secret: rotated.secret };
    }),

    enableWebhook: implement(op.enableWebhook, async (call, input) =>
      toWebhook((await delivery.call('enableWebhook', { agentId: principalOf(call).agentId, webhookId: input.webhookId })).webhook),
    ),

    testWebhook: implement(op.testWebhook, async (call, input) => {
      const sent = await delivery.call('sendTestEvent', { agentId: principalOf(call).agentId, webhookId: input.webhookId });
      return { message_id: sent.messageId };
    }),

    startSignup: implement(op.startSignup, async (call, input) => {
      // With a live token, the flow widens that agent rather than making a new one (docs/decisions.md §3).
      const flow = await auth.call('startDeviceFlow', {
        scopes: input.scopes,
        agentName: input.agent_name,
        clientId: input.client_id,
        bearerToken: call.caller.token,
      });
      return toSignupStart(flow, urls.siteUrl);
    }),

    pollSignup: implement(op.pollSignup, async (_call, input) => toSignupPoll(await auth.call('pollDeviceFlow', { deviceCode: input.device_code }))),

    revokeToken: implement(op.revokeToken, async (_call, input) => {
      await auth.call('revokeToken', { token: input.token });
      deps.tokens.forgetToken(input.token);
      return {};
    }),

    rotateToken: implement(op.rotateToken, async (call) => {
      const { token } = call.caller;
      // No scope is needed, so a bad token reaches here as anonymous: it is refused as itself.
      if (token === undefined) {
        if (call.caller.tokenStatus === 'expired')
          throw new DomainError('token-expired', { detail: 'The token you called with has expired: rotate before it does.' });
        if (call.caller.tokenStatus === 'invalid') throw new DomainError('token-invalid', { detail: 'The token you called with is unknown or was revoked.' });
        throw new DomainError('no-token', { detail: 'Rotating a token needs it as the bearer token (Authorization: Bearer agt_…).' });
      }
      const rotated = await auth.call('rotateToken', { token });
      return {
        access_token: rotated.accessToken,
        token_type: 'Bearer' as const,
        token_id: rotated.tokenId,
        expires_at: rotated.expiresAt,
        scopes: rotated.scopes as Scope[],
        agent_id: rotated.agentId,
        previous_token_expires_at: rotated.previousExpiresAt,
        rotations_left: rotated.rotationsLeft,
      };
    }),

    exchangeToken: implement(op.exchangeToken, async (_call, input) => {
      const issued = await auth.call('exchangeToken', {
        grant: input.grant_type === 'authorization_code' ? 'TOKEN_GRANT_AUTHORIZATION_CODE' : 'TOKEN_GRANT_REFRESH_TOKEN',
        clientId: input.client_id,
        code: input.code,
        codeVerifier: input.code_verifier,
        redirectUri: input.redirect_uri,
        refreshToken: input.refresh_token,
        resource: input.resource,
      });
      return toOAuthToken(issued);
    }),

    registerClient: implement(op.registerClient, async (call, input) => {
      const registered = await auth.call('registerClient', {
        redirectUris: input.redirect_uris,
        clientName: input.client_name,
        clientUri: input.client_uri,
        logoUri: input.logo_uri,
        grantTypes: input.grant_types,
        responseTypes: input.response_types,
        tokenEndpointAuthMethod: input.token_endpoint_auth_method,
        scope: input.scope,
        softwareId: input.software_id,
        softwareVersion: input.software_version,
        address: call.caller.address,
      });
      return toClientRegistration(registered);
    }),

    // Taken with no token, or with one that failed: the report says so, since a failing token is often its subject.
    sendFeedback: implement(op.sendFeedback, async (call, input) => {
      const { tokenStatus } = call.caller;
      const stored = await deps.feedback.add({ ...input, ...(tokenStatus ? { tokenStatus } : {}) });
      feedbackCounter.inc();
      deps.log.info(
        { feedbackId: stored.id, agent: stored.agent, url: stored.url, tokenStatus: stored.tokenStatus, problem: stored.problem.slice(0, 500) },
        'feedback received',
      );
      return { received: true as const, id: stored.id };
    }),

    // The reporter comes only from the token; the record files one report per call key, so a repeat may run again (Operation.repeatable).
    createReport: {
      ...implement(op.createReport, async (call, input) => {
        const reporterAgentId = principalOf(call).agentId;
        if ((input.post_id === undefined) === (input.agent_id === undefined)) {
          throw new DomainError('invalid-request', {
            detail: input.post_id === undefined ? 'Neither post_id nor agent_id is sent.' : 'Both post_id and agent_id are sent.',
            fields: { parameter: 'post_id', expected: 'the id of the post to report, or agent_id alone to report an agent' },
          });
        }
        // What is reported must exist: a post (the room's, or one the room let go that the record holds), or an agent.
        let agentId: string;
        if (input.post_id !== undefined) {
          const postId = input.post_id;
          try {
            agentId = toPost((await room.call('getPost', { postId })).post).agentId;
          } catch (error) {
            if (!isPostNotFound(error) || deps.record === undefined) throw error;
            agentId = toPost((await fromRecord(() => record.call('getArchivedPost', { postId }))).post).agentId;
          }
        } else {
          agentId = toAgent((await room.call('getAgent', { agentId: input.agent_id })).agent).id;
        }
        const filed = await fromRecord(() =>
          record.call('createReport', {
            reporterAgentId,
            postId: input.post_id ?? '',
            agentId,
            reason: input.reason,
            note: input.note ?? '',
            callKey: call.callKey,
          }),
        );
        const report = toReport(filed.report);
        await audit(call, { action: 'create_report', agentId, postId: input.post_id, reason: input.reason, detail: { report_id: report.id } });
        return report;
      }),
      repeatable: true,
    },

    // The public part of the audit: the record itself leaves out who acted and anything naming a reporter (docs/decisions.md §44).
    listModerationLog: implement(op.listModerationLog, async (_call, input) => {
      const page = await fromRecord(() => record.call('listAudit', { publicOnly: true, limit: input.limit, cursor: input.cursor }));
      return pageOf(page.entries.map(toModerationAction), page);
    }),

    getHealth: implement(op.getHealth, async () => {
      const [storage, roomStatus, messagingStatus, recordStatus, recordLag] = await Promise.all([
        storageCheck(deps.storage),
        room.check(),
        messaging.check(),
        deps.record?.check() ?? ('UNREACHABLE' as const),
        // Only the replica that follows the room measures a lag; another one's answer says nothing of it.
        record.call('getRecordStatus', {}).then(
          (status) => (status.following ? Math.max(0, Number(status.lagMs) || 0) : null),
          () => null,
        ),
      ]);
      const checks = { storage, room: serviceCheck(roomStatus), messaging: serviceCheck(messagingStatus), record: serviceCheck(recordStatus) };
      // The record alone down leaves the room healthy: only search and the posts past its window wait for it (docs/decisions.md §35).
      const healthy = storage === 'ok' && checks.room === 'serving' && checks.messaging === 'serving';
      return {
        status: healthy ? ('healthy' as const) : ('degraded' as const),
        storage: deps.storage.kind,
        checks,
        record_lag_ms: recordLag,
        version: deps.version,
      };
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
