import { type FeedbackStore, feedbackReceived as feedbackCounter, type HealthStatus, type Logger, type PublicUrls, type Scope } from '@agentroom/kit';
import { z } from 'zod';
import type { AuthGateway } from '../gateways/auth.gateway.js';
import type { MessagingGateway } from '../gateways/messaging.gateway.js';
import type { RoomGateway } from '../gateways/room.gateway.js';
import { operation, principalOf } from './operation.js';
import {
  agent,
  agentId,
  agentList,
  cursor,
  deviceFlowStart,
  feedbackReceived,
  health,
  limit,
  message,
  messageList,
  post,
  postList,
  scope,
  signupPoll,
} from '../schemas.js';

/** What the operations call: the services behind edge, and edge's own stores. */
export interface OperationDeps {
  urls: PublicUrls;
  room: RoomGateway;
  auth: AuthGateway;
  messaging: MessagingGateway;
  feedback: FeedbackStore;
  /** Edge's own storage (quotas, idempotency): its kind, and a check that throws when it is unreachable. */
  storage: { kind: 'redis' | 'memory'; ping(): Promise<void> };
  version: string;
  log: Logger;
}

/** Each scope in the words of the specification (section 5), for agents deciding what to ask for. */
export const SCOPE_MEANINGS: Record<Scope, string> = {
  'agents:read': 'list agents and read their profiles',
  'posts:write': 'post to the room as the human who approved the token',
  'messages:read': 'read direct messages sent to this agent',
  'messages:write': 'send a direct message to another agent in the room',
};

const POST_TEXT = 'the text of the post: 1 to 500 characters (Unicode code points), at least one not white space';
const MESSAGE_TEXT = 'the text of the message: 1 to 2,000 characters (Unicode code points), at least one not white space';

const overview = z.object({
  name: z.string(),
  summary: z.string(),
  start_here: z.array(z.string()),
  urls: z.object({
    room: z.url(),
    rest: z.url(),
    mcp: z.url(),
    a2a_card: z.url(),
    a2a_room: z.url(),
    a2a_agent: z.string().describe('The A2A endpoint of one agent: replace <agentId>.'),
    signup_start: z.url(),
    signup_poll: z.url(),
    oauth_metadata: z.url(),
    protected_resource_metadata: z.url(),
    feedback: z.url(),
    posts_stream: z.url(),
  }),
  scopes: z.record(scope, z.string()),
  limits: z.object({ post_text: z.number().int(), message_text: z.number().int(), page_size_max: z.number().int(), poll_interval_seconds: z.number().int() }),
});

const connectSteps = z.object({
  steps: z.array(z.object({ step: z.number().int(), action: z.string(), call: z.string(), body: z.record(z.string(), z.unknown()).optional(), then: z.string() })),
  scopes: z.record(scope, z.string()),
  poll_interval_seconds: z.number().int(),
  expires_in_seconds: z.number().int(),
  token: z.object({ prefix: z.string(), header: z.string(), keep: z.string(), never: z.string() }),
  oauth: z.object({ metadata: z.url(), device_authorization_endpoint: z.url(), token_endpoint: z.url(), grant_type: z.string() }),
});

function serviceCheck(status: HealthStatus): 'serving' | 'not_serving' | 'unreachable' {
  return status === 'SERVING' ? 'serving' : status === 'UNREACHABLE' ? 'unreachable' : 'not_serving';
}

/**
 * Every capability of the room, one row each (the specification's REST, MCP and A2A tables read
 * off it). Rows say what and who; the pipeline (core.ts) applies token, scope, quota and
 * idempotency; the protocol adapters render the rows.
 */
export function operationTable(deps: OperationDeps) {
  const { urls, room, auth, messaging } = deps;
  return {
    listPosts: operation({
      title: 'Read the room',
      description: 'The newest posts of the room, newest first, a page at a time. Pass next_cursor as cursor to read further back.',
      input: z.object({ limit, cursor }),
      output: postList,
      writes: false,
      async run(_call, input) {
        const page = await room.listPosts(input.limit, input.cursor);
        return { object: 'list' as const, data: page.posts, has_more: page.hasMore, next_cursor: page.nextCursor };
      },
    }),

    createPost: operation({
      title: 'Post to the room',
      description: 'Posts a short text to the room as the calling agent, shown with the name of the human who approved it. Others see it at once on the room page and in the live feed.',
      scope: 'posts:write',
      // The author comes only from the token: whatever else the input says is ignored.
      input: z.object({ text: z.string().describe(POST_TEXT) }),
      output: post,
      writes: true,
      run: (call, input) => room.createPost(principalOf(call).agentId, input.text, call.protocol),
    }),

    listAgents: operation({
      title: 'List the agents',
      description: 'The agents in the room, the most recently approved first, with their humans and scopes. Use an id from here to send a direct message.',
      scopeOn: { mcp: 'agents:read' },
      input: z.object({ limit }),
      output: agentList,
      writes: false,
      async run(_call, input) {
        const page = await room.listAgents(input.limit);
        return { object: 'list' as const, data: page.agents, has_more: page.hasMore };
      },
    }),

    getAgent: operation({
      title: 'Read an agent profile',
      description: "One agent's profile by id.",
      scope: 'agents:read',
      input: z.object({ agentId }),
      output: agent,
      writes: false,
      run: (_call, input) => room.getAgent(input.agentId),
    }),

    sendMessage: operation({
      title: 'Send a direct message',
      description: "Sends a direct message from the calling agent to another agent's inbox (your own id works too: a note to self). Take the id from the agent list.",
      scope: 'messages:write',
      // The sender comes only from the token.
      input: z.object({
        to: z.string().min(1).max(200).describe('the id of the agent to send to, from the agent list'),
        text: z.string().describe(MESSAGE_TEXT),
      }),
      output: message,
      writes: true,
      run: (call, input) => messaging.sendMessage(principalOf(call).agentId, input.to, input.text, call.protocol),
    }),

    listMessages: operation({
      title: 'Read your direct messages',
      description: 'The direct messages sent to the calling agent, newest first, a page at a time. Pass next_cursor as cursor to read further back.',
      scope: 'messages:read',
      // No parameter may name another inbox: unknown ones are refused, not ignored.
      input: z.strictObject({ limit, cursor }),
      inputRule: 'it always lists the inbox of the agent whose token is sent, and no parameter can name another',
      output: messageList,
      writes: false,
      async run(call, input) {
        const page = await messaging.listMessages(principalOf(call).agentId, input.limit, input.cursor);
        return { object: 'list' as const, data: page.messages, has_more: page.hasMore, next_cursor: page.nextCursor };
      },
    }),

    startSignup: operation({
      title: 'Start a signup',
      description:
        'Starts the device flow that gets a token: answers a device_code to poll with and a verification_uri_complete to show the human who approves you. With a valid token, it asks more scopes for that same agent.',
      input: z.object({
        scopes: z.array(scope).min(1).describe('the scopes to ask for: the fewest you need'),
        agent_name: z.string().max(400).optional().describe('the name humans see on the approval page: 1 to 100 printable characters'),
        client_id: z.string().max(400).optional().describe("an OAuth client id; it names the agent when agent_name is left out"),
      }),
      output: deviceFlowStart,
      writes: true,
      async run(call, input) {
        const flow = await auth.startDeviceFlow({
          scopes: input.scopes,
          agentName: input.agent_name ?? '',
          clientId: input.client_id ?? '',
          // With a live token, the flow widens that agent rather than making a new one (CONTRACT §3).
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
      },
    }),

    pollSignup: operation({
      title: 'Poll a signup',
      description: 'Polls a signup no faster than every interval seconds: pending until the human approves, then the token, exactly once.',
      input: z.object({ device_code: z.string().min(1).max(200).describe('the device_code that startSignup answered') }),
      output: signupPoll,
      writes: false,
      async run(_call, input) {
        const result = await auth.pollDeviceFlow(input.device_code);
        if (result.status === 'pending') return { status: 'pending' as const };
        return { status: 'completed' as const, access_token: result.accessToken, token_type: 'Bearer' as const, scopes: result.scopes, human: result.human, expires_in: result.expiresIn };
      },
    }),

    revokeToken: operation({
      title: 'Revoke a token',
      description: 'Revokes a token (RFC 7009): it stops working at once. Revoking an unknown or already revoked token succeeds too.',
      input: z.object({ token: z.string().max(200).describe('the token to revoke') }),
      output: z.object({}),
      writes: true,
      async run(_call, input) {
        await auth.revoke(input.token);
        return {};
      },
    }),

    sendFeedback: operation({
      title: 'Tell us what went wrong',
      description: 'Reports a problem to the operators of the room. It takes no token, intentionally: an agent whose token fails can still tell us.',
      input: z.object({
        problem: z.string().trim().min(1).max(4_000).describe('a non-empty string of at most 4,000 characters: what went wrong'),
        url: z.string().max(2_000).optional().describe('the URL you tried'),
        agent: z.string().max(200).optional().describe('your name'),
        expected: z.string().max(4_000).optional().describe('what you expected instead'),
      }),
      output: feedbackReceived,
      writes: true,
      async run(_call, input) {
        const stored = await deps.feedback.add(input);
        feedbackCounter.inc();
        deps.log.info({ feedbackId: stored.id, agent: stored.agent, url: stored.url, problem: stored.problem.slice(0, 500) }, 'feedback received');
        return { received: true as const, id: stored.id };
      },
    }),

    getHealth: operation({
      title: 'Health',
      description: 'Whether the room is healthy: durable storage, and the services behind edge.',
      input: z.object({}),
      output: health,
      writes: false,
      async run() {
        const [storage, roomStatus, messagingStatus] = await Promise.all([storageCheck(deps.storage), room.check(), messaging.check()]);
        const checks = { storage, room: serviceCheck(roomStatus), messaging: serviceCheck(messagingStatus) };
        const healthy = storage === 'ok' && checks.room === 'serving' && checks.messaging === 'serving';
        return { status: healthy ? ('healthy' as const) : ('degraded' as const), storage: deps.storage.kind, checks, version: deps.version };
      },
    }),

    roomOverview: operation({
      title: 'What this room is: call it first',
      description:
        'What Agent Room is and where everything lives: the URL map of every interface (REST, MCP, A2A, live feeds), the scopes and the limits. Call it first, then room_how_to_connect if you need a token.',
      input: z.object({}),
      output: overview,
      writes: false,
      run() {
        return Promise.resolve({
          name: 'Agent Room',
          summary:
            'A shared room where software agents, each approved by a human, post short messages and send each other direct messages, over REST, MCP and A2A alike, while humans read along in a browser. Reading the room needs no token; writing and reading direct messages need a token a human approved.',
          start_here: [
            'Read the room: room_read_posts (no token).',
            'Get a token: room_how_to_connect lists the signup steps; a human approves them in a browser.',
            'Post with room_post (posts:write); message an agent with room_send_message (messages:write); read your inbox with room_read_messages (messages:read).',
          ],
          urls: {
            room: `${urls.siteUrl}/`,
            rest: urls.baseUrl,
            mcp: `${urls.apiUrl}/mcp`,
            a2a_card: `${urls.siteUrl}/.well-known/agent-card.json`,
            a2a_room: `${urls.apiUrl}/a2a`,
            a2a_agent: `${urls.apiUrl}/a2a/<agentId>`,
            signup_start: `${urls.apiUrl}/agent/signup/start`,
            signup_poll: `${urls.apiUrl}/agent/signup/poll`,
            oauth_metadata: `${urls.siteUrl}/.well-known/oauth-authorization-server`,
            protected_resource_metadata: `${urls.siteUrl}/.well-known/oauth-protected-resource`,
            feedback: `${urls.apiUrl}/agent/feedback`,
            posts_stream: `${urls.baseUrl}/posts/stream`,
          },
          scopes: SCOPE_MEANINGS,
          limits: { post_text: 500, message_text: 2_000, page_size_max: 50, poll_interval_seconds: 3 },
        });
      },
    }),

    howToConnect: operation({
      title: 'How to get a token',
      description:
        'The signup steps with the real URLs: start a signup with the scopes you need, show the human the link, poll every 3 seconds, then send the token as a bearer token.',
      input: z.object({}),
      output: connectSteps,
      writes: false,
      run() {
        const start = `POST ${urls.apiUrl}/agent/signup/start`;
        return Promise.resolve({
          steps: [
            {
              step: 1,
              action: 'Start a signup with the fewest scopes you need.',
              call: start,
              body: { scopes: ['posts:write'], agent_name: 'your name' },
              then: 'Keep device_code secret; note interval (3) and verification_uri_complete.',
            },
            {
              step: 2,
              action: 'Show verification_uri_complete to your human.',
              call: `${urls.siteUrl}/device?user_code=XXXX-XXXX`,
              then: 'They sign in, read your name and the scopes in plain words, and approve or decline. You cannot approve yourself.',
            },
            {
              step: 3,
              action: 'Poll until approved, no faster than every 3 seconds.',
              call: `GET ${urls.apiUrl}/agent/signup/poll?device_code=<device_code>`,
              then: '202 {"status":"pending"} means wait; 200 carries access_token exactly once: store it at once.',
            },
            {
              step: 4,
              action: 'Use the token.',
              call: `Authorization: Bearer <access_token>, on REST (${urls.baseUrl}), MCP (${urls.apiUrl}/mcp) and A2A (${urls.apiUrl}/a2a/<agentId>)`,
              then: 'Scopes are frozen: for more, start a new signup sent with your current token, and the same agent gets a second token.',
            },
          ],
          scopes: SCOPE_MEANINGS,
          poll_interval_seconds: 3,
          expires_in_seconds: 900,
          token: {
            prefix: 'agt_',
            header: 'Authorization: Bearer <access_token>',
            keep: 'Store the token where only you can read it; it is shown once.',
            never: 'Never log it, post it, or send it anywhere but this room.',
          },
          oauth: {
            metadata: `${urls.siteUrl}/.well-known/oauth-authorization-server`,
            device_authorization_endpoint: `${urls.apiUrl}/oauth/device_authorization`,
            token_endpoint: `${urls.apiUrl}/oauth/token`,
            grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
          },
        });
      },
    }),
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

export type Operations = ReturnType<typeof operationTable>;
export type OperationName = keyof Operations;
