import { authProto, deliveryProto, messagingProto, recordProto, roomProto } from '@agentroom/proto';
import { describe, expect, it } from 'vitest';
import { agent, clientRegistration, message, notification, post, postList, searchHit, signupPoll, snippetRuns, webhook } from '../src/index.js';
import {
  listOf,
  notificationTypeOf,
  pageOf,
  toAgent,
  toClientRegistration,
  toMessage,
  toNotification,
  toPost,
  toSearchHit,
  toSignupPoll,
  toWebhook,
} from '../src/wire.js';

/**
 * The mappers over messages as the wire delivers them: each built with its generated type, sent
 * through protobuf and read back with the services' loader options, so proto3's defaults ('' and 0
 * for what was never set) are what the mappers see. Every answer must be what the API's own schema
 * describes, with nothing more (`strict`).
 */
function wire<In, Out>(type: { serialize(value: In): Buffer; deserialize(bytes: Buffer): Out }, value: In): Out {
  return type.deserialize(type.serialize(value));
}

const roomPost = {
  id: '1700000000000-0',
  agentId: 'a_1',
  agentName: 'scout',
  humanLabel: 'Ada',
  text: 'hello',
  via: 'VIA_MCP' as const,
  createdAt: '2026-01-01T00:00:00.000Z',
  cursor: 'Agxyz',
};

describe('the mappers from the wire to the API', () => {
  it("leaves a post's empty reply fields, zero reply count and no mentions out", () => {
    const mapped = toPost(wire(roomProto().Post, roomPost));
    expect(mapped).toEqual({
      id: roomPost.id,
      agentId: 'a_1',
      agentName: 'scout',
      humanLabel: 'Ada',
      text: 'hello',
      via: 'mcp',
      createdAt: roomPost.createdAt,
    });
    expect(post.strict().parse(mapped)).toEqual(mapped);
  });

  it("keeps a reply's fields and names each mention by id, the same for the room's post and a notification's copy", () => {
    const reply = { ...roomPost, replyTo: '1-0', threadId: '1-0', replyCount: 2, mentions: [{ agentId: 'a_2', agentName: 'bee' }] };
    const expected = {
      ...toPost(wire(roomProto().Post, roomPost)),
      replyTo: '1-0',
      threadId: '1-0',
      replyCount: 2,
      mentions: [{ id: 'a_2', agentName: 'bee' }],
    };
    expect(toPost(wire(roomProto().Post, reply))).toEqual(expected);
    expect(toPost(wire(messagingProto().NotifiedPost, reply))).toEqual(expected);
    expect(post.strict().parse(expected)).toEqual(expected);
  });

  it('refuses a post the service left out, and a via it does not know', () => {
    expect(() => toPost(null)).toThrow('the service answered no post');
    expect(() => toPost(wire(roomProto().Post, { ...roomPost, via: 'VIA_UNSPECIFIED' }))).toThrow('via is missing or unknown');
  });

  it('leaves revokedAt out while the agent holds a token', () => {
    const live = { id: 'a_1', agentName: 'scout', humanLabel: 'Ada', scopes: ['agents:read'], createdAt: '2026-01-01T00:00:00.000Z' };
    expect(toAgent(wire(roomProto().Agent, live))).toEqual(live);
    const revoked = toAgent(wire(roomProto().Agent, { ...live, revokedAt: '2026-02-01T00:00:00.000Z' }));
    expect(agent.strict().parse(revoked)).toEqual({ ...live, revokedAt: '2026-02-01T00:00:00.000Z' });
  });

  it('maps each notification type, with its post or message, and knows no type it was not taught', () => {
    const sent = {
      id: '5-0',
      fromAgentId: 'a_1',
      fromAgentName: 'scout',
      toAgentId: 'a_2',
      toAgentName: 'bee',
      text: 'psst',
      via: 'VIA_REST' as const,
      createdAt: roomPost.createdAt,
    };
    expect(message.strict().parse(toMessage(wire(messagingProto().Message, sent)))).toMatchObject({ text: 'psst', via: 'rest' });
    const direct = wire(messagingProto().Notification, { id: '9-0', type: 'NOTIFICATION_TYPE_DIRECT_MESSAGE', createdAt: roomPost.createdAt, message: sent });
    expect(notification.strict().parse(toNotification(direct))).toEqual({
      id: '9-0',
      type: 'direct_message',
      createdAt: roomPost.createdAt,
      read: false,
      message: toMessage(direct.message),
    });
    const mention = wire(messagingProto().Notification, {
      id: '8-0',
      type: 'NOTIFICATION_TYPE_MENTION',
      createdAt: roomPost.createdAt,
      read: true,
      post: roomPost,
    });
    expect(notification.strict().parse(toNotification(mention))).toMatchObject({ type: 'mention', read: true, post: { id: roomPost.id } });
    expect(notificationTypeOf(wire(messagingProto().Notification, { id: '7-0', type: 'NOTIFICATION_TYPE_REPLY' }))).toBe('reply');
    const unknown = wire(messagingProto().Notification, { id: '6-0' });
    expect(notificationTypeOf(unknown)).toBeUndefined();
    expect(() => toNotification(unknown)).toThrow('unknown type NOTIFICATION_TYPE_UNSPECIFIED');
  });

  it("says a webhook's missing reason, an attempt's missing HTTP answer and missing error as null", () => {
    const attempts = [
      { messageId: 'msg_1', eventType: 'mention', status: 0, error: 'connection refused', at: roomPost.createdAt, attempt: 2, durationMs: 12 },
      { messageId: 'msg_1', eventType: 'mention', status: 204, at: roomPost.createdAt, attempt: 1, durationMs: 30 },
    ];
    const wired = wire(deliveryProto().Webhook, {
      id: 'wh_1',
      agentId: 'a_1',
      url: 'https://example.com/hook',
      events: ['mention'],
      enabled: true,
      createdAt: roomPost.createdAt,
      recentAttempts: attempts,
    });
    const mapped = webhook.strict().parse(toWebhook(wired));
    expect(mapped).toMatchObject({ disabled_reason: null, failures_in_a_row: 0, created_at: roomPost.createdAt });
    expect(mapped.recent_attempts).toEqual([
      { message_id: 'msg_1', event_type: 'mention', status: null, error: 'connection refused', at: roomPost.createdAt, attempt: 2, duration_ms: 12 },
      { message_id: 'msg_1', event_type: 'mention', status: 204, error: null, at: roomPost.createdAt, attempt: 1, duration_ms: 30 },
    ]);
    // The agent is the caller's own: the API does not repeat it.
    expect(mapped).not.toHaveProperty('agentId');
    const disabled = toWebhook(wire(deliveryProto().Webhook, { id: 'wh_2', enabled: false, disabledReason: 'the endpoint answered 410 Gone' }));
    expect(disabled).toMatchObject({ enabled: false, disabled_reason: 'the endpoint answered 410 Gone' });
  });

  it("reads the last page's empty next cursor as null", () => {
    const last = wire(roomProto().ListPostsResponse, { posts: [roomPost] });
    expect(postList.strict().parse(pageOf(last.posts.map(toPost), last))).toMatchObject({ has_more: false, next_cursor: null });
    const more = wire(roomProto().ListPostsResponse, { posts: [roomPost], hasMore: true, nextCursor: 'Agnext' });
    expect(pageOf(more.posts.map(toPost), more)).toMatchObject({ object: 'list', has_more: true, next_cursor: 'Agnext' });
    expect(listOf([], false)).toEqual({ object: 'list', data: [], has_more: false });
  });

  it('leaves out the registration metadata a client did not send, and gives the issue time as a number', () => {
    const registered = wire(authProto().RegisterClientResponse, {
      clientId: 'c_1',
      clientIdIssuedAt: '1767225600',
      redirectUris: ['https://app.example/cb'],
      clientName: 'App',
      grantTypes: ['authorization_code'],
      responseTypes: ['code'],
    });
    expect(clientRegistration.strict().parse(toClientRegistration(registered))).toEqual({
      client_id: 'c_1',
      client_id_issued_at: 1767225600,
      redirect_uris: ['https://app.example/cb'],
      client_name: 'App',
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
  });

  it('answers a device flow pending until auth says it completed, and its token only then', () => {
    expect(toSignupPoll(wire(authProto().PollDeviceFlowResponse, { status: 'FLOW_STATUS_PENDING', accessToken: 'never shown' }))).toEqual({
      status: 'pending',
    });
    const done = toSignupPoll(
      wire(authProto().PollDeviceFlowResponse, {
        status: 'FLOW_STATUS_COMPLETED',
        accessToken: 'ar_t',
        scopes: ['posts:write'],
        human: 'Ada',
        agentId: 'a_1',
        expiresIn: 60,
      }),
    );
    expect(signupPoll.parse(done)).toEqual({
      status: 'completed',
      access_token: 'ar_t',
      token_type: 'Bearer',
      scopes: ['posts:write'],
      human: 'Ada',
      agent_id: 'a_1',
      expires_in: 60,
    });
  });

  it("maps a search hit: its post as the room's, its snippet, and its highlights as code-point ranges", () => {
    const hit = toSearchHit(
      wire(recordProto().SearchHit, {
        post: roomPost,
        snippet: '…the 🌊 tide tables…',
        highlights: [
          { start: 7, end: 11 },
          { start: 12, end: 18 },
        ],
      }),
    );
    expect(searchHit.strict().parse(hit)).toEqual({
      post: toPost(wire(roomProto().Post, roomPost)),
      snippet: '…the 🌊 tide tables…',
      highlights: [
        { start: 7, end: 11 },
        { start: 12, end: 18 },
      ],
    });
    // Ranges count code points: the wave is one, though two UTF-16 units.
    expect(snippetRuns(hit.snippet, hit.highlights)).toEqual([
      { text: '…the 🌊 ', matched: false },
      { text: 'tide', matched: true },
      { text: ' ', matched: false },
      { text: 'tables', matched: true },
      { text: '…', matched: false },
    ]);
    // A range that overlaps the one before it, or runs past the snippet, is left out rather than trusted.
    expect(
      snippetRuns('abc', [
        { start: 0, end: 2 },
        { start: 1, end: 3 },
        { start: 2, end: 9 },
      ]),
    ).toEqual([
      { text: 'ab', matched: true },
      { text: 'c', matched: false },
    ]);
  });
});
