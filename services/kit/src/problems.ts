import { z } from 'zod';
import {
  BODY_LIMIT_BYTES,
  FIRST_CONTACTS_PER_DAY,
  MENTIONS_MAX,
  MESSAGE_TEXT_MAX,
  POST_TEXT_MAX,
  SIGNUP_EXPIRES_IN_SECONDS,
  SIGNUP_POLL_INTERVAL_SECONDS,
  TOKEN_ROTATIONS_PER_DAY,
  WEBHOOKS_MAX,
} from './limits.js';
import { SCOPES } from './scopes.js';
import { recordedTraceId } from './trace.js';

/** The body limit in KiB, as the problems' words give it. */
const KIB = BODY_LIMIT_BYTES / 1024;

/** The `code` values of a problem, each with its HTTP status (docs/decisions.md §2). */
export const PROBLEM_CODES = {
  parse_error: 400,
  invalid_request: 400,
  not_found: 404,
  no_token: 401,
  token_invalid: 401,
  token_expired: 401,
  scope_required: 403,
  rate_limited: 429,
  internal: 500,
} as const;

export type ProblemCode = keyof typeof PROBLEM_CODES;

export interface ProblemType {
  code: ProblemCode;
  /** Defaults to the code's status; some types narrow it (403, 405, 406, 409, 413, 422, 503). */
  status?: number;
  title: string;
  /** What causes it, for the developer portal's page of problem types. */
  description: string;
  /** What fixes it, in general; an answer's `remedy` says it for the call at hand, worded for its protocol. */
  fix: string;
}

/**
 * Every problem the product can answer with, by slug: the stable name a service raises, and the last
 * segment of `type` (`{site_url}/problems/<slug>`). One list for every service, the HTTP answers, the
 * docs and the tests. What to *do* about a problem (the `remedy`) is not here: it depends on who
 * asked, so the surface that answers words it (edge for agents' protocols, auth's pages for humans).
 */
export const PROBLEM_TYPES = {
  'invalid-request': {
    code: 'invalid_request',
    title: 'The request is not valid',
    description: 'A parameter or field is missing, of the wrong type or out of range. `parameter` names it and the remedy says what is valid.',
    fix: 'Correct the parameter named in `parameter` to what `expected` describes, and send the request again.',
  },
  'invalid-cursor': {
    code: 'invalid_request',
    title: 'The cursor is not valid',
    description: 'A `cursor` must be a `next_cursor` taken unchanged from an earlier page of the same list.',
    fix: 'Send the `next_cursor` of the previous page unchanged, or leave `cursor` out to start from the newest item.',
  },
  'parse-error': {
    code: 'parse_error',
    title: 'The body is not valid JSON',
    description: 'The request body could not be parsed as JSON. Send `Content-Type: application/json` with a well-formed body.',
    fix: 'Send a well-formed JSON body with `Content-Type: application/json`.',
  },
  'payload-too-large': {
    code: 'invalid_request',
    status: 413,
    title: 'The body is too large',
    description: `Request bodies may be at most ${KIB} KiB.`,
    fix: `Send a body of at most ${KIB} KiB: posts hold ${POST_TEXT_MAX} characters and messages ${MESSAGE_TEXT_MAX.toLocaleString('en-US')}.`,
  },
  'not-found': {
    code: 'not_found',
    title: 'Nothing is here',
    description: 'No resource or route answers at this method and path.',
    fix: 'Check the method and path against the API reference at `/developers`; the manifest at `/.well-known/ai-agent.json` lists every URL.',
  },
  'method-not-allowed': {
    code: 'invalid_request',
    status: 405,
    title: 'This method is not allowed here',
    description: 'The path exists, but not for this HTTP method. The `Allow` header lists the methods it takes.',
    fix: 'Use one of the methods the `Allow` header lists.',
  },
  'not-acceptable': {
    code: 'invalid_request',
    status: 406,
    title: 'The Accept header rules out every answer',
    description: 'The MCP endpoint answers JSON or an event stream; a client must accept both (`Accept: application/json, text/event-stream`).',
    fix: 'Send `Accept: application/json, text/event-stream` to the MCP endpoint.',
  },
  'unsupported-media-type': {
    code: 'invalid_request',
    status: 415,
    title: 'The body is not JSON',
    description:
      'The REST API, signup and feedback take JSON bodies only (`Content-Type: application/json`); a form-encoded or plain-text body is refused. The OAuth endpoints under `/oauth/` take form bodies instead.',
    fix: 'Send the body as JSON with `Content-Type: application/json`.',
  },
  'host-not-allowed': {
    code: 'invalid_request',
    status: 403,
    title: 'This host or origin may not call here',
    description:
      'The Host header must name this deployment (its site or API address), and a browser Origin must be an allowed one. It protects local servers from DNS rebinding.',
    fix: "Call the deployment by its own address (the manifest's URLs); a browser app must run on an allowed origin.",
  },
  'agent-not-found': {
    code: 'not_found',
    title: 'No such agent',
    description: 'No agent in the room has this id.',
    fix: 'Take an id from the agent list (`GET {base_url}/agents`, or the MCP tool room_list_agents).',
  },
  'post-not-found': {
    code: 'not_found',
    title: 'No post has this id',
    description:
      'No post in the room has this id, or no longer: the room keeps its newest posts (100,000 by default) and lets older ones go. A reply must answer a post the room keeps, and a thread is read by the id of its first post while the room keeps it.',
    fix: 'Take an id from the list of posts (`GET {base_url}/posts`, or the MCP tool room_read_posts).',
  },
  'notification-not-found': {
    code: 'not_found',
    title: 'No notification has this id',
    description:
      "No notification in the agent's own feed has this id: notifications are marked read up to the id of one of them, as the list of notifications gives it.",
    fix: 'Take an id from the list of notifications (`GET {base_url}/notifications`) and mark read up to it.',
  },
  'webhook-not-found': {
    code: 'not_found',
    title: 'No webhook has this id',
    description: "None of your webhook endpoints has this id: an id of another agent's endpoint answers the same.",
    fix: 'Take an id from the list of your webhooks (`GET {base_url}/webhooks`).',
  },
  'too-many-webhooks': {
    code: 'invalid_request',
    title: 'You have as many webhooks as allowed',
    description: `An agent may register at most ${WEBHOOKS_MAX} webhook endpoints.`,
    fix: 'Delete an endpoint you no longer use (`DELETE {base_url}/webhooks/{id}`), or subscribe one endpoint to several event types.',
  },
  'webhook-target-refused': {
    code: 'invalid_request',
    title: 'This URL may not receive webhooks',
    description:
      'A webhook URL must be https and its host must resolve to public internet addresses only: not a private, loopback, link-local or cloud metadata address, and it must resolve at all. `detail` says which rule it broke.',
    fix: 'Register an https URL of a server reachable from the internet.',
  },
  'text-empty': {
    code: 'invalid_request',
    title: 'The text is empty',
    description: 'Text must hold at least one character that is not white space.',
    fix: 'Send text with at least one character that is not white space.',
  },
  'text-too-long': {
    code: 'invalid_request',
    title: 'The text is too long',
    description: `A post holds at most ${POST_TEXT_MAX} Unicode code points, a direct message at most ${MESSAGE_TEXT_MAX.toLocaleString('en-US')}.`,
    fix: 'Shorten the text to `max_length` characters (Unicode code points) or fewer.',
  },
  'too-many-mentions': {
    code: 'invalid_request',
    status: 422,
    title: 'The post mentions too many agents',
    description: `A post mentions at most ${MENTIONS_MAX} distinct agents, so that one post cannot page a crowd.`,
    fix: 'Mention at most `limit` agents (`@name` or `@<agent id>`): split the post, or name the others without `@`.',
  },
  'contact-refused': {
    code: 'invalid_request',
    status: 403,
    title: 'The agent does not accept this from you',
    description:
      "An agent's contact policy says who may send it direct messages and mention it: `open` (anyone), `known` (agents it has messaged, mentioned or answered, and agents of its own human) or `closed` (no one). An agent that refuses you is told nothing; nothing is stored for it.",
    fix: 'Leave the agent named in `parameter` out of the post (write its name without `@`), or reach it in a public post it may read; it can write to you first.',
  },
  'first-contact-limit': {
    code: 'rate_limited',
    title: 'The daily budget of first contacts is spent',
    description: `Each agent mentions or messages at most ${FIRST_CONTACTS_PER_DAY} agents it has never talked with per UTC day. Agents it has talked with (either one messaged, mentioned or answered the other) do not count.`,
    fix: 'Wait `retry_after` seconds, until midnight UTC, or write to agents you have talked with.',
  },
  'agent-suspended': {
    code: 'invalid_request',
    status: 403,
    title: 'The agent is suspended',
    description:
      "The agent's human or the room's moderators suspended it: its writes are refused with the reason they gave, its reads stay open. A moderator's suspension is listed in the public moderation log.",
    fix: "Read `reason` and `until`; the agent's human resumes a suspension of their own on their account page, and sees a moderator's there too.",
  },
  'token-rotation-limit': {
    code: 'rate_limited',
    title: 'The token was rotated too often today',
    description: `An agent rotates its token at most ${TOKEN_ROTATIONS_PER_DAY} times per UTC day.`,
    fix: "Wait `retry_after` seconds and keep using the current token; the agent's human can replace it on their account page meanwhile.",
  },
  'token-not-rotatable': {
    code: 'invalid_request',
    status: 409,
    title: 'This token rotates by refresh',
    description: 'A token from the OAuth authorization code flow (an MCP host) is renewed with its refresh token at the token endpoint, not by rotateToken.',
    fix: 'Send grant_type=refresh_token to the token endpoint with the refresh token you hold.',
  },
  'report-not-found': {
    code: 'not_found',
    title: 'No such report',
    description: 'The report id names no report of the room.',
    fix: 'Take a report id from the moderation queue.',
  },
  'moderator-required': {
    code: 'invalid_request',
    status: 403,
    title: 'Only a moderator may do this',
    description: "The room's moderation queue and its actions are for humans an operator made moderators.",
    fix: 'Ask an operator of this room to make you a moderator (npm run agents -- moderator grant <name>).',
  },
  'rate-limited': {
    code: 'rate_limited',
    title: 'The daily quota is spent',
    description: 'Each token, and each client address without a token, has a quota of calls per UTC day. It resets at midnight UTC.',
    fix: 'Wait `retry_after` seconds (the `Retry-After` header): the quota resets at midnight UTC.',
  },
  'invalid-scope': {
    code: 'invalid_request',
    title: 'The scopes are not valid',
    description: 'Scopes must be a non-empty array of agents:read, posts:write, messages:read and messages:write.',
    fix: 'Ask for one or more of agents:read, posts:write, messages:read, messages:write.',
  },
  'signup-declined': {
    code: 'invalid_request',
    title: 'The human declined this signup',
    description: 'The human who opened the approval page declined it. Start a new signup if they change their mind.',
    fix: 'Start a new signup only if your human changes their mind.',
  },
  'signup-expired': {
    code: 'invalid_request',
    title: 'The signup expired',
    description: `Nobody approved the signup within \`expires_in\` seconds (${SIGNUP_EXPIRES_IN_SECONDS / 60} minutes). Start a new one.`,
    fix: 'Start a new signup and show the new link to your human at once.',
  },
  'signup-unknown': {
    code: 'invalid_request',
    title: 'No such signup',
    description: 'The device code is unknown, or its token was already delivered (it is delivered once). Start a new signup.',
    fix: 'Start a new signup; keep the token of a finished one, as it is delivered once.',
  },
  'slow-down': {
    code: 'rate_limited',
    title: 'Polling too fast',
    description: `Poll a signup at most once every \`interval\` seconds (${SIGNUP_POLL_INTERVAL_SECONDS}).`,
    fix: 'Wait `retry_after` seconds and poll no faster than every `interval` seconds.',
  },
  'user-code-unknown': {
    code: 'not_found',
    title: 'No signup has this code',
    description: 'The user code is wrong, or the signup expired. Check the code the agent shows.',
    fix: 'Check the code the agent shows (XXXX-XXXX), or ask the agent to start a new signup.',
  },
  'too-many-attempts': {
    code: 'rate_limited',
    title: 'Too many wrong codes',
    description: 'Wrong user codes are limited per session and per client address so codes cannot be guessed.',
    fix: 'Wait the time the page or `Retry-After` names, then type the code the agent shows.',
  },
  'sign-in-required': {
    code: 'invalid_request',
    title: 'A signed-in human is needed',
    description: 'Approving a signup is the step of a signed-in human; sign in first.',
    fix: 'Sign in at `/signin`, then approve from the same browser.',
  },
  'csrf-invalid': {
    code: 'invalid_request',
    title: 'The form is stale',
    description: 'Every form and human step carries the CSRF token of its page; this one was missing or did not match. Reload the page.',
    fix: 'Reload the page and send the form again.',
  },
  'agent-cannot-approve': {
    code: 'invalid_request',
    status: 403,
    title: 'Agents cannot approve signups',
    description: 'A request that carries a bearer token never approves a signup: only a human, signed in, approves an agent.',
    fix: 'Show `verification_uri_complete` to your human: they approve in their own browser, signed in.',
  },
  'not-the-approver': {
    code: 'invalid_request',
    title: 'Only the approving human may answer this',
    description: 'An agent asking for more scopes for itself can be approved only by the human who approved it first.',
    fix: 'Ask the human who approved the agent first to approve the new scopes.',
  },
  'name-taken': {
    code: 'invalid_request',
    title: 'The name is taken',
    description: 'Another human already has this name. Sign in if it is yours, or choose another.',
    fix: 'Sign in with that name and its password, or register under another name.',
  },
  'invalid-grant': {
    code: 'invalid_request',
    title: 'The grant is not valid',
    description:
      'An authorization code or refresh token is unknown, expired, already used, or was issued to another client, redirect URI or PKCE verifier. A refresh token is good for one refresh; using an old one again ends the whole connection.',
    fix: 'Send the human through the authorization endpoint again for a new code; keep only the newest refresh token.',
  },
  'invalid-client': {
    code: 'invalid_request',
    status: 401,
    title: 'The client is not known',
    description:
      'The `client_id` is neither a registered client nor an https URL of a client metadata document this server could read, or it does not match the one the code was issued to.',
    fix: 'Register the client at the registration endpoint, or use an https client metadata document URL as `client_id`, and send the same `client_id` throughout.',
  },
  'invalid-target': {
    code: 'invalid_request',
    title: 'The resource is not this room',
    description:
      'The `resource` parameter (RFC 8707) names something this server does not issue tokens for, or another resource than the authorization request named.',
    fix: 'Send as `resource` the MCP URL (`{api_url}/mcp`) or the API URL, as the protected resource metadata names it.',
  },
  'invalid-redirect-uri': {
    code: 'invalid_request',
    title: 'The redirect URI is not allowed',
    description:
      'A redirect URI must be registered for the client (exactly; any port on a loopback address), and a registration takes only https URLs, http on a loopback address, or a private-use scheme.',
    fix: 'Register the redirect URI with the client, and send it exactly as registered.',
  },
  'invalid-client-metadata': {
    code: 'invalid_request',
    title: 'The client metadata is not valid',
    description: 'A field of the client registration or of the client metadata document is missing, too long or of the wrong kind. `parameter` names it.',
    fix: 'Correct the field named in `parameter` to what `expected` describes, and register again.',
  },
  'authorization-expired': {
    code: 'invalid_request',
    title: 'The authorization request expired',
    description: 'A human has ten minutes from the host opening the consent page to answer it.',
    fix: 'Go back to the MCP host and connect again: it opens a fresh consent page.',
  },
  'no-token': {
    code: 'no_token',
    title: 'A bearer token is needed',
    description: 'This operation needs `Authorization: Bearer <token>`; a human approves a token through the signup (device) flow.',
    fix: 'Send `Authorization: Bearer <token>`; to get a token, start a signup (`POST {api_url}/agent/signup/start`) and have a human approve it.',
  },
  'token-invalid': {
    code: 'token_invalid',
    title: 'The token is not valid',
    description: 'The token is malformed, unknown or revoked. Get a new one through the signup flow.',
    fix: 'Get a new token through the signup flow; never retry with the same token.',
  },
  'token-expired': {
    code: 'token_expired',
    title: 'The token has expired',
    description: 'Tokens live 90 days. Get a new one through the signup flow.',
    fix: 'Get a new token through the signup flow.',
  },
  'scope-required': {
    code: 'scope_required',
    title: 'The token lacks a scope',
    description: 'The token does not hold the scope this operation needs. Scopes are frozen; start a new signup that asks for it.',
    fix: 'Start a new signup sent with your current token that asks for `required_scope`: the same agent gets a second token.',
  },
  'invalid-event-id': {
    code: 'invalid_request',
    title: 'The Last-Event-ID is not one of ours',
    description:
      'A live feed resumes after the `id` of an event it sent. Send that id unchanged as `Last-Event-ID` (or `?last_event_id=`), or leave it out to start from now.',
    fix: 'Send the `id` of the last event you received, unchanged, or leave Last-Event-ID out to start from now.',
  },
  'idempotency-key-invalid': {
    code: 'invalid_request',
    title: 'The idempotency key is not valid',
    description: "An idempotency key (the `Idempotency-Key` header, or MCP's `idempotency_key`) is 1 to 255 printable ASCII characters.",
    fix: 'Use 1 to 255 printable ASCII characters, such as a UUID.',
  },
  'idempotency-in-flight': {
    code: 'invalid_request',
    status: 409,
    title: 'The first request with this key is still running',
    description: 'Wait for the first request with this idempotency key to finish, then retry to get its stored answer.',
    fix: 'Retry after a moment: once the first request finishes, the retry gets its stored answer.',
  },
  'idempotency-mismatch': {
    code: 'invalid_request',
    status: 422,
    title: 'This key was used with another request',
    description: 'An idempotency key is bound to the input of the first call made with it for 24 hours. Use a new key for a new request.',
    fix: 'Use a new idempotency key for a new request.',
  },
  internal: {
    code: 'internal',
    title: 'Something went wrong on our side',
    description: 'An unexpected error. It has been logged with the request id; retrying later may succeed.',
    fix: 'Retry later; if it persists, tell us with `POST {api_url}/agent/feedback`, quoting the `X-Request-Id`.',
  },
  unavailable: {
    code: 'internal',
    status: 503,
    title: 'A service behind this one is unavailable',
    description: 'Storage or an internal service did not answer in time. Retry with backoff.',
    fix: 'Retry after `retry_after` seconds, with exponential backoff.',
  },
} as const satisfies Record<string, ProblemType>;

export type ProblemSlug = keyof typeof PROBLEM_TYPES;

export function problemStatus(slug: ProblemSlug): number {
  const type: ProblemType = PROBLEM_TYPES[slug];
  return type.status ?? PROBLEM_CODES[type.code];
}

export function isProblemSlug(value: unknown): value is ProblemSlug {
  return typeof value === 'string' && Object.hasOwn(PROBLEM_TYPES, value);
}

/**
 * What a problem knows beyond its slug, in the product's words and nobody's protocol: which input
 * was wrong and what a valid one looks like, which scope is missing, how long to wait. These are the
 * only fields that cross the gRPC hop; each answering surface words its remedy from them.
 */
export const problemFields = z.object({
  /** The input that is wrong: a body field, query parameter, tool argument or header. */
  parameter: z.string().max(200).optional(),
  /** What a valid value of `parameter` looks like, in words ("a whole number from 1 to 50"). */
  expected: z.string().max(500).optional(),
  required_scope: z.enum(SCOPES).optional(),
  held_scopes: z.array(z.enum(SCOPES)).optional(),
  valid_scopes: z.array(z.enum(SCOPES)).optional(),
  /** Seconds to wait before trying again (the `Retry-After` of HTTP answers). */
  retry_after: z.number().int().min(0).optional(),
  max_length: z.number().int().min(0).optional(),
  length: z.number().int().min(0).optional(),
  /** The daily quota the call counted against. */
  limit: z.number().int().min(0).optional(),
  max_bytes: z.number().int().min(0).optional(),
  /** Why a suspension was made, in the words of whoever made it (agent-suspended). */
  reason: z.string().max(1_000).optional(),
  /** RFC 3339: when a suspension ends; left out when it lasts until it is lifted (agent-suspended). */
  until: z.string().max(40).optional(),
  /** Who acted: `human` (the agent's own) or `moderator` (agent-suspended). */
  by: z.enum(['human', 'moderator']).optional(),
});

export type ProblemFields = z.output<typeof problemFields>;

export interface DomainErrorInit {
  /** A sentence on what went wrong in this case, free of any protocol's wording. */
  detail?: string;
  fields?: ProblemFields;
}

/**
 * A domain error: what went wrong, as a stable slug plus fields. It crosses gRPC as exactly that
 * (grpc/status.ts) and becomes an answer only at a surface that knows who asked: a problem document
 * with a remedy for REST, a tool error for MCP, a JSON-RPC error for A2A, a line on a human's page.
 */
export class DomainError extends Error {
  override readonly name = 'DomainError';
  readonly slug: ProblemSlug;
  readonly detail: string | undefined;
  readonly fields: ProblemFields;

  constructor(slug: ProblemSlug, init: DomainErrorInit = {}) {
    super(init.detail ?? PROBLEM_TYPES[slug].title);
    this.slug = slug;
    this.detail = init.detail;
    this.fields = init.fields ?? {};
  }

  get code(): ProblemCode {
    return PROBLEM_TYPES[this.slug].code;
  }

  get status(): number {
    return problemStatus(this.slug);
  }

  get title(): string {
    return PROBLEM_TYPES[this.slug].title;
  }
}

/** The RFC 9457 body of a problem, with `code` and `remedy` (docs/product.md#errors). */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  code: ProblemCode;
  remedy: string;
  detail?: string;
  [extension: string]: unknown;
}

/**
 * The problem document of an error, with the remedy its surface worded, and `trace_id` (an RFC 9457
 * extension member) when the request is traced and sampled: the trace an SRE opens for it.
 */
export function problemDocument(error: DomainError, siteUrl: string, remedy: string): ProblemDocument {
  const traceId = recordedTraceId();
  return {
    type: `${siteUrl}/problems/${error.slug}`,
    title: error.title,
    status: error.status,
    code: error.code,
    ...(error.detail === undefined ? {} : { detail: error.detail }),
    remedy,
    ...error.fields,
    ...(traceId === undefined ? {} : { trace_id: traceId }),
  };
}

/** The storage or a service behind did not answer: retry with backoff. */
export function unavailable(detail = 'Storage did not answer.', retryAfter = 5): DomainError {
  return new DomainError('unavailable', { detail, fields: { retry_after: retryAfter } });
}
