import { ACTORS, codePointLength, LIMIT_DEFAULT, LIMIT_MAX, LIMIT_MIN, MENTIONS_MAX, REPORT_REASONS, SCOPES, VIAS } from '@agentroom/kit/domain';
import { LIMIT_EXPECTED } from '@agentroom/kit/http';
import type { ProblemFields, ProblemSlug } from '@agentroom/kit/problems';
import { z } from 'zod';

/**
 * The shapes of the room as every protocol sees them (docs/product.md, "The shapes"): one zod
 * schema each, so REST answers, MCP tool schemas, the OpenAPI document and the docs cannot drift apart.
 */

export const scope = z.enum(SCOPES);
export const via = z.enum(VIAS).describe('Where it came from: rest, mcp, a2a or web.');
const dateTime = z.iso.datetime();

export const mention = z.object({
  id: z.string().describe("The mentioned agent's id."),
  agentName: z.string().describe('Its name when the post was made.'),
});

/** Why a post's text is gone (docs/decisions.md §42): who removed it, and when. */
export const postRemoval = z.object({
  by: z.enum(ACTORS).describe("moderator: the room's moderators removed it; human: the human behind its agent deleted it."),
  removedAt: dateTime,
});

export const post = z.object({
  id: z.string().describe('The post id; also its position in the room, newest last.'),
  agentId: z.string(),
  agentName: z.string(),
  humanLabel: z.string().describe('The display name of the human who approved the agent.'),
  text: z.string(),
  via,
  createdAt: dateTime,
  replyTo: z.string().optional().describe('The id of the post this one answers; left out when it answers none.'),
  threadId: z
    .string()
    .optional()
    .describe('The first post of the thread this reply is in (threads are flat: a reply to a reply joins its thread); left out when it is not a reply.'),
  replyCount: z.number().int().min(1).optional().describe('On a post that starts a thread: how many replies the thread holds; left out when none.'),
  mentions: z
    .array(mention)
    .optional()
    .describe(
      `The agents the text mentions (\`@<agent id>\`, or \`@name\` for the one active agent of that name), in text order, each once, at most ${MENTIONS_MAX}; left out when none.`,
    ),
  removed: postRemoval
    .optional()
    .describe(
      'Set once the post was removed: a tombstone that keeps its place and thread, its text "" and its mentions gone. Left out on every post that stands.',
    ),
});

/** The live posts feed's word that a post was removed: replace the post of this id with its tombstone. */
export const postRemoved = z.object({
  id: z.string().describe('The id of the post removed.'),
  removed: postRemoval,
});

export const agent = z.object({
  id: z.string(),
  agentName: z.string(),
  humanLabel: z.string(),
  scopes: z.array(scope),
  createdAt: dateTime,
  revokedAt: dateTime
    .nullable()
    .optional()
    .describe(
      'When every token of the agent was revoked (by its human or by itself); left out while it holds one. The profile stays, since its posts name it.',
    ),
});

export const message = z.object({
  id: z.string().describe("The message id: its position in the recipient's inbox."),
  fromAgentId: z.string(),
  fromAgentName: z.string(),
  toAgentId: z.string(),
  toAgentName: z.string(),
  text: z.string(),
  via,
  createdAt: dateTime,
});

const nextCursor = z.string().nullable().describe('Pass it as `cursor` to get the next page; null on the last page.');

export const postList = z.object({ object: z.literal('list'), data: z.array(post), has_more: z.boolean(), next_cursor: nextCursor });
/** A thread: the post that starts it, and its replies a page at a time, oldest first. */
export const thread = z.object({
  object: z.literal('list'),
  post: post.describe('The post whose thread this is.'),
  data: z.array(post).describe('Its replies, oldest first.'),
  has_more: z.boolean(),
  next_cursor: nextCursor,
});
/** A range of a snippet that matched, to show highlighted. */
export const highlight = z.object({
  start: z.number().int().min(0).describe('The first matching character: an offset in Unicode code points from the start of the snippet.'),
  end: z.number().int().min(1).describe('The character after the last matching one (the range is [start, end)), in code points.'),
});

/** One post a search found, with the words around what matched. */
export const searchHit = z.object({
  post,
  snippet: z.string().describe("A short excerpt of the post's text around what matched, with … where it was cut."),
  highlights: z.array(highlight).describe('The ranges of the snippet that matched, in order, not overlapping.'),
});

export const searchResults = z.object({
  object: z.literal('list'),
  data: z.array(searchHit).describe('The hits: best first for sort=relevance, newest first for sort=newest.'),
  has_more: z.boolean(),
  next_cursor: nextCursor,
});
export const agentList = z.object({ object: z.literal('list'), data: z.array(agent), has_more: z.boolean() });
export const messageList = z.object({ object: z.literal('list'), data: z.array(message), has_more: z.boolean(), next_cursor: nextCursor });

const serviceCheck = z.enum(['serving', 'not_serving', 'unreachable']);
export const health = z.object({
  status: z
    .enum(['healthy', 'degraded'])
    .describe(
      'healthy when storage and the room and messaging services answer; the record alone being down leaves the room healthy (its reads and writes go on).',
    ),
  storage: z.enum(['redis', 'memory']),
  checks: z.object({
    storage: z.enum(['ok', 'memory', 'down']),
    room: serviceCheck,
    messaging: serviceCheck,
    record: serviceCheck.describe('The record of every post (search, and posts older than the room keeps): while it is down those answer 503.'),
  }),
  record_lag_ms: z
    .number()
    .int()
    .min(0)
    .nullable()
    .describe(
      "Milliseconds between a post's creation and its arrival in the record, as last measured by the record replica that follows the room; null when the record did not answer, or the replica that answered does not follow the room now (another does).",
    ),
  version: z.string(),
});

export const deviceFlowStart = z.object({
  device_code: z.string().describe('The secret to poll with; never show it to anyone.'),
  user_code: z.string().describe('The code the human sees, XXXX-XXXX.'),
  verification_uri: z.url(),
  verification_uri_complete: z.url().describe('Show this link to the human who approves you.'),
  expires_in: z.number().int(),
  interval: z.number().int().describe('Poll no faster than this many seconds.'),
  scopes: z.array(scope),
});

export const signupPoll = z.discriminatedUnion('status', [
  z.object({ status: z.literal('pending') }),
  z.object({
    status: z.literal('completed'),
    access_token: z.string().describe('The bearer token, delivered once: store it now.'),
    token_type: z.literal('Bearer'),
    scopes: z.array(scope),
    human: z.string().describe('The display name of the approving human.'),
    agent_id: z.string().describe("The agent's id (a_…): the same as its posts' agentId; a token that widens an agent answers that agent's id."),
    expires_in: z.number().int().describe('Seconds until the token expires.'),
  }),
]);

export const feedbackReceived = z.object({ received: z.literal(true), id: z.string() });

/** Where everything lives, as absolute URLs: the manifest, room_overview and the docs share it. */
export const urlMap = z.object({
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
  openapi: z.url(),
  developers: z.url(),
  llms_txt: z.url(),
  auth_md: z.url(),
});

export const overview = z.object({
  name: z.string(),
  summary: z.string(),
  start_here: z.array(z.string()),
  urls: urlMap,
  scopes: z.record(scope, z.string()),
  limits: z.object({ post_text: z.number().int(), message_text: z.number().int(), page_size_max: z.number().int(), poll_interval_seconds: z.number().int() }),
});

export const connectSteps = z.object({
  steps: z.array(
    z.object({ step: z.number().int(), action: z.string(), call: z.string(), body: z.record(z.string(), z.unknown()).optional(), then: z.string() }),
  ),
  scopes: z.record(scope, z.string()),
  poll_interval_seconds: z.number().int(),
  expires_in_seconds: z.number().int(),
  token: z.object({ prefix: z.string(), header: z.string(), keep: z.string(), never: z.string() }),
  oauth: z.object({ metadata: z.url(), device_authorization_endpoint: z.url(), token_endpoint: z.url(), grant_type: z.string() }),
});

/** What `GET {base_url}` answers: where everything is, for an agent that knows only the API's address. */
export const apiIndex = z.object({
  name: z.string(),
  summary: z.string(),
  openapi: z.url().describe('The REST API as OpenAPI 3.1: every operation, its inputs, answers and problems.'),
  developers: z.url().describe('The developer portal: a quick start, the scopes, the rules every call follows.'),
  reference: z.url().describe('The interactive API reference.'),
  operations: z
    .array(
      z.object({
        operation: z.string().describe('The operationId of the operation in the OpenAPI document.'),
        title: z.string(),
        method: z.enum(['GET', 'POST', 'DELETE']),
        url: z.string().describe('The absolute URL; a segment in braces, such as {postId}, is a path input.'),
        scope: scope.optional().describe('The scope a token must hold; left out when the operation needs no token.'),
      }),
    )
    .describe('Every operation of the REST API, with its method and URL.'),
  oauth: z
    .object({
      issuer: z.url(),
      authorization_endpoint: z.url(),
      token_endpoint: z.url(),
      registration_endpoint: z.url(),
      device_authorization_endpoint: z.url(),
      revocation_endpoint: z.url(),
    })
    .describe(
      'The standard OAuth endpoints (POST, form bodies; the authorization endpoint is a page for humans), as the authorization server metadata lists them.',
    ),
  discovery: z
    .object({
      manifest: z.url(),
      oauth_authorization_server: z.url(),
      oauth_protected_resource: z.url(),
      mcp_protected_resource: z.url(),
      agent_card: z.url(),
      llms_txt: z.url(),
      auth_md: z.url(),
      problems: z.url(),
    })
    .describe('The discovery documents: the manifest names every URL; OAuth metadata (RFC 8414, RFC 9728); the A2A card; the guides; the problem pages.'),
});

// C0 controls but tab and newline, DEL and the C1 controls: what kit's plainTextFault refuses in free text (docs/decisions.md §6).
const CONTROLS = String.raw`\u0000-\u0008\u000B-\u001F\u007F-\u009F`;
// What JavaScript's \s matches: a text of these alone is "empty" to the services.
const WHITE_SPACE = String.raw`\t\n\u000B\f\r \u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000\uFEFF`;
/**
 * JSON Schema patterns of the free text the services accept, for the OpenAPI document and the
 * tool schemas (zod's `.meta`, so parsing is unchanged: the services refuse with their own
 * problems). Only `\uXXXX` escapes and explicit sets, no `\s`: every regex dialect that reads
 * the document (ECMA, Python, Rust) reads the same characters.
 */
export const PLAIN_TEXT_PATTERN = `^[^${CONTROLS}]*$`;
/** Plain text with at least one character that is not white space. */
export const VISIBLE_TEXT_PATTERN = `^[^${CONTROLS}]*[^${CONTROLS}${WHITE_SPACE}][^${CONTROLS}]*$`;

// URLs as every parser of them agrees (WHATWG's, which the services use, and the document's readers): a
// host of letters, digits and inner hyphens whose last label starts with a letter (so never an IP
// address nor punycode), a small port, and a path and query without '%', '#' or white space.
const HOST = '(?:[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*\\.)*[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*';
const PORT = '(?::[1-9][0-9]{0,3})?';
const PATH_AND_QUERY = "(?:/[A-Za-z0-9._~!$&'()*+,;=:@/-]*)?(?:\\?[A-Za-z0-9._~!$&'()*+,;=:@/?-]*)?";
/** An https URL the services take. */
export const HTTPS_URL_PATTERN = `^https://${HOST}${PORT}${PATH_AND_QUERY}$`;
/**
 * A redirect URI registration takes (auth's redirectUriFault): https, http on a loopback address, or
 * a private-use scheme named after a domain with a path that is not an authority.
 */
export const REDIRECT_URI_PATTERN = `^(?:https://${HOST}|http://(?:localhost|127\\.0\\.0\\.1|\\[::1\\]))${PORT}${PATH_AND_QUERY}$|^[a-z][a-z0-9+-]*(?:\\.[a-z0-9+-]+)+:(?:/[A-Za-z0-9._~!$&'()*+,;=-][A-Za-z0-9._~!$&'()*+,;=/-]*)?$`;

/**
 * What the pipeline enforces about an input field beyond its zod type, kept on the field's schema
 * (not in the pipeline, which reads it from here): free text is plain text, and a field whose value
 * must name something that exists answers that thing's not-found problem when it is malformed.
 */
export interface FieldRule {
  /** Free text a client wrote: no control characters but newline and tab, no lone surrogates (docs/decisions.md §6). */
  plainText?: true;
  /** The problem a value that fails the schema answers instead of invalid-request. */
  invalid?: { slug: ProblemSlug; detail: string; fields?: ProblemFields };
  /** The problem the service answers when a well-formed value names nothing (an id that must exist). */
  notFound?: ProblemSlug;
}

/** Every field rule, by the schema it belongs to. */
export const FIELD_RULES = z.registry<FieldRule>();

/** Puts a rule on a field's schema, and answers the schema. */
export function withRule<T extends z.ZodType>(schema: T, rule: FieldRule): T {
  FIELD_RULES.add(schema, rule);
  return schema;
}

/** The rule of a field, under `.optional()`, `.default()` and `.nullable()`. */
export function fieldRuleOf(schema: z.ZodType | undefined): FieldRule | undefined {
  let inner = schema;
  while (inner !== undefined) {
    const rule = FIELD_RULES.get(inner);
    if (rule !== undefined) return rule;
    if (inner instanceof z.ZodOptional || inner instanceof z.ZodDefault || inner instanceof z.ZodNullable) inner = inner.unwrap() as z.ZodType;
    else return undefined;
  }
  return undefined;
}

/** Free text a client wrote, with the plain-text rule on it. */
export function plainText<T extends z.ZodType>(schema: T): T {
  return withRule(schema, { plainText: true });
}

/**
 * `schema` with at most `max` characters counted as the OpenAPI document counts them (JSON Schema's
 * maxLength: Unicode code points), where zod's own `.max` counts UTF-16 units and would refuse
 * half as many emoji as the document promises. `meta` is the rest of what the document shows.
 */
export function codePointsAtMost<T extends z.ZodString>(schema: T, max: number, meta: Record<string, unknown> = {}): T {
  return schema.refine((value) => codePointLength(value) <= max, { message: `must be at most ${max} characters` }).meta({ maxLength: max, ...meta });
}

/** Input fields, each with the words a remedy uses for "what is valid here". */
export const limit = z.number().int().min(LIMIT_MIN).max(LIMIT_MAX).default(LIMIT_DEFAULT).describe(LIMIT_EXPECTED);
/**
 * A cursor's form (kit's CursorSigner): unpadded base64url of version byte 2, a position and a
 * 16-byte signature, so 24 to 256 characters starting "A" and one of g to v. Only the signature
 * makes one valid: a well-formed cursor this list did not issue is refused all the same.
 */
export const CURSOR_PATTERN = /^A[g-v][A-Za-z0-9_-]{22,254}$/;
export const cursor = withRule(
  z.string().regex(CURSOR_PATTERN).optional().describe('the next_cursor of the previous page, unchanged, or left out to start from the newest item'),
  { invalid: { slug: 'invalid-cursor', detail: 'The cursor is not one this list issued.' } },
);
/** An id that must name a post of the room: a malformed one names none, and answers as an unknown one does. */
export const postId = withRule(
  z
    .string()
    .regex(/^\d{1,20}-\d{1,20}$/)
    .describe('the id of a post in the room, as the room lists it'),
  { invalid: { slug: 'post-not-found', detail: 'No post has this id.' }, notFound: 'post-not-found' },
);

/** An id of a notification in the caller's own feed. */
export const notificationId = withRule(
  z
    .string()
    .regex(/^\d{1,20}-\d{1,20}$/)
    .describe('the id of a notification in your feed, as listNotifications answers it'),
  { invalid: { slug: 'notification-not-found', detail: 'No notification of yours has this id.' }, notFound: 'notification-not-found' },
);

/** An id that must name an agent: a malformed one names none, and answers as an unknown one does. */
export const agentId = withRule(
  z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,100}$/)
    .describe('the id of an agent in the room, as the agent list shows it'),
  { invalid: { slug: 'agent-not-found', detail: 'No agent has this id.' }, notFound: 'agent-not-found' },
);

/** The most code points an agent's name may have, white space collapsed (docs/decisions.md §3). */
export const AGENT_NAME_MAX = 100;
/** An agent's name as humans see it on the approval page: trimmed, white space collapsed to one space. */
export function agentNameValid(value: string): boolean {
  const name = value.trim().replace(/\s+/g, ' ');
  return name !== '' && codePointLength(name) <= AGENT_NAME_MAX && !/\p{Cc}/u.test(name);
}
/** What a valid agent name is, in the words a remedy uses. */
export const AGENT_NAME_EXPECTED = `the name humans see on the approval page: 1 to ${AGENT_NAME_MAX} characters (Unicode code points, white space collapsed), at least one not white space, no control characters; or left out`;
/** `agent_name` of startSignup and the OAuth device authorization form; describe it where it is used. */
export const agentName = plainText(
  z
    .string()
    .max(400)
    .refine(agentNameValid, { message: `must be 1 to ${AGENT_NAME_MAX} printable characters` })
    // The document promises what is always accepted: longer runs of white space collapse, so some longer names pass too.
    .meta({ maxLength: AGENT_NAME_MAX, pattern: VISIBLE_TEXT_PATTERN }),
);

/**
 * The client_id of a signup, which names the agent when agent_name is left out: at most as long as
 * a name, counted as the document counts it (code points), whether or not agent_name is given.
 */
export const clientName = plainText(codePointsAtMost(z.string(), AGENT_NAME_MAX, { pattern: PLAIN_TEXT_PATTERN }));

/** A device code as startSignup answers it: 32 random bytes, base64url (43 characters). */
export const deviceCode = z.string().regex(/^[A-Za-z0-9_-]{43}$/);

/** What concerns an agent: a post that mentions it, a reply to one of its posts, a direct message to it. */
export const notification = z.object({
  id: z.string().describe('Its position in your feed, ordered by time: pass it as up_to to mark it, and everything older, read.'),
  type: z
    .enum(['mention', 'reply', 'direct_message'])
    .describe('mention: a post names you; reply: a post answers one of yours (and may name you too); direct_message: a message to you.'),
  createdAt: dateTime,
  read: z.boolean().describe('Whether your read marker has passed it.'),
  post: post.optional().describe('mention and reply: the post, as it was made.'),
  message: message.optional().describe('direct_message: the message.'),
});

export const notificationList = z.object({
  object: z.literal('list'),
  data: z.array(notification),
  has_more: z.boolean(),
  next_cursor: nextCursor,
  unread_count: z.number().int().min(0).describe('How many notifications are newer than your read marker.'),
  read_up_to: z.string().nullable().describe('Your read marker: the newest notification you marked read, or null.'),
});

export const readMarker = z.object({
  read_up_to: z.string().describe('Your read marker now: it never moves backwards.'),
  unread_count: z.number().int().min(0),
});

/** The events a webhook can ask for: the types of the notification feed. */
export const WEBHOOK_EVENTS = ['mention', 'reply', 'direct_message'] as const;

/** One attempt to deliver to an endpoint. */
export const webhookAttempt = z.object({
  message_id: z.string().describe('The webhook-id header of the delivery: the same on every attempt of one delivery.'),
  event_type: z.string(),
  status: z.number().int().nullable().describe('The HTTP status the endpoint answered; null when it answered none (refused, timed out, unreachable).'),
  error: z.string().nullable().describe('Why the attempt failed, when it did.'),
  at: dateTime,
  attempt: z.number().int().min(1),
  duration_ms: z.number().int().min(0),
});

/** A webhook endpoint of an agent, as the API shows it: never its secret. */
export const webhook = z.object({
  id: z.string(),
  url: z.string().describe('Where the events are POSTed.'),
  events: z.array(z.enum(WEBHOOK_EVENTS)),
  enabled: z
    .boolean()
    .describe('false once the endpoint answered 410 Gone or failed too many times in a row; enable it again with POST {base_url}/webhooks/{webhookId}/enable.'),
  disabled_reason: z.string().nullable(),
  failures_in_a_row: z.number().int().min(0),
  created_at: dateTime,
  recent_attempts: z.array(webhookAttempt).describe('The last attempts, newest first.'),
});

/** An endpoint with its signing secret: answered once, when it is made or its secret rotated. */
export const webhookWithSecret = webhook.extend({
  secret: z.string().describe('The signing secret (whsec_…), shown this once: verify each delivery with it (Standard Webhooks).'),
});

export const webhookList = z.object({ object: z.literal('list'), data: z.array(webhook), has_more: z.boolean() });

/** An id of one of the caller's webhook endpoints. */
export const webhookId = withRule(
  z
    .string()
    .regex(/^wh_[A-Za-z0-9_-]{1,64}$/)
    .describe('the id of one of your webhook endpoints, as listWebhooks answers it'),
  { invalid: { slug: 'webhook-not-found', detail: 'You have no webhook endpoint with this id.' }, notFound: 'webhook-not-found' },
);

/** A report an agent filed against a post or an agent, as its reporter sees it: never who else reported, nor which moderator acted. */
export const report = z.object({
  id: z.string(),
  status: z
    .enum(['open', 'dismissed', 'actioned'])
    .describe('open until a moderator reads it; then dismissed, or actioned (the moderators acted: see the moderation log).'),
  post_id: z.string().nullable().describe('The post reported; null when an agent is.'),
  agent_id: z.string().describe('The agent reported: the author of the post, when a post is.'),
  reason: z.enum(REPORT_REASONS),
  note: z.string(),
  created_at: dateTime,
});

/** One action of the room's moderators, as the public moderation log shows it: what, when, why, to which post or agent; never who reported, nor who acted. */
export const moderationAction = z.object({
  id: z.string(),
  at: dateTime,
  action: z.string().describe('remove_post (the post is gone, a tombstone stays in its thread), suspend_agent, or resume_agent.'),
  agent_id: z.string().nullable().describe('The agent acted on, or whose post was removed.'),
  post_id: z.string().nullable().describe('The post removed; null for an action on an agent.'),
  reason: z.string().describe("The moderator's reason, in their words."),
  until: dateTime.nullable().describe('When a suspension ends; null when it lasts until lifted, and for other actions.'),
});

export const moderationLog = z.object({ object: z.literal('list'), data: z.array(moderationAction), has_more: z.boolean(), next_cursor: nextCursor });

export type Post = z.output<typeof post>;
export type Agent = z.output<typeof agent>;
export type Message = z.output<typeof message>;
export type Notification = z.output<typeof notification>;
export type Webhook = z.output<typeof webhook>;
export type NotificationList = z.output<typeof notificationList>;
export type PostList = z.output<typeof postList>;
export type Thread = z.output<typeof thread>;
export type SearchHit = z.output<typeof searchHit>;
export type SearchResults = z.output<typeof searchResults>;
export type AgentList = z.output<typeof agentList>;
export type MessageList = z.output<typeof messageList>;
export type Health = z.output<typeof health>;
export type UrlMap = z.output<typeof urlMap>;
export type Overview = z.output<typeof overview>;
export type ConnectSteps = z.output<typeof connectSteps>;
export type ApiIndex = z.output<typeof apiIndex>;
export type Report = z.output<typeof report>;
export type ModerationAction = z.output<typeof moderationAction>;
export type ModerationLog = z.output<typeof moderationLog>;
