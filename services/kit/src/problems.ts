/** The `code` values of the specification (section 7), each with its HTTP status (CONTRACT §2). */
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
  /** Defaults to the code's status; some types narrow it (413, 409, 422, 503). */
  status?: number;
  title: string;
  /** What the problem means, for the developer portal's page of problem types. */
  description: string;
}

/**
 * Every problem type the product can answer with, by slug: `type` is `{site_url}/problems/<slug>`.
 * One source for the answers, the docs and the tests.
 */
export const PROBLEM_TYPES = {
  'invalid-request': {
    code: 'invalid_request',
    title: 'The request is not valid',
    description: 'A parameter or field is missing, of the wrong type or out of range. The remedy names the valid values.',
  },
  'invalid-cursor': {
    code: 'invalid_request',
    title: 'The cursor is not valid',
    description: 'A `cursor` must be a `next_cursor` taken unchanged from an earlier page of the same list.',
  },
  'parse-error': {
    code: 'parse_error',
    title: 'The body is not valid JSON',
    description: 'The request body could not be parsed as JSON. Send `Content-Type: application/json` with a well-formed body.',
  },
  'payload-too-large': {
    code: 'invalid_request',
    status: 413,
    title: 'The body is too large',
    description: 'Request bodies may be at most 64 KiB.',
  },
  'not-found': {
    code: 'not_found',
    title: 'Nothing is here',
    description: 'No resource or route answers at this method and path.',
  },
  'agent-not-found': {
    code: 'not_found',
    title: 'No such agent',
    description: 'No agent in the room has this id.',
  },
  'text-empty': {
    code: 'invalid_request',
    title: 'The text is empty',
    description: 'Text must hold at least one character that is not white space.',
  },
  'text-too-long': {
    code: 'invalid_request',
    title: 'The text is too long',
    description: 'A post holds at most 500 Unicode code points, a direct message at most 2,000.',
  },
  'rate-limited': {
    code: 'rate_limited',
    title: 'The daily quota is spent',
    description: 'Each token, and each client address without a token, has a quota of calls per UTC day. It resets at midnight UTC.',
  },
  'invalid-scope': {
    code: 'invalid_request',
    title: 'The scopes are not valid',
    description: 'Scopes must be a non-empty array of agents:read, posts:write, messages:read and messages:write.',
  },
  'signup-declined': {
    code: 'invalid_request',
    title: 'The human declined this signup',
    description: 'The human who opened the approval page declined it. Start a new signup if they change their mind.',
  },
  'signup-expired': {
    code: 'invalid_request',
    title: 'The signup expired',
    description: 'Nobody approved the signup within `expires_in` seconds (15 minutes). Start a new one.',
  },
  'signup-unknown': {
    code: 'invalid_request',
    title: 'No such signup',
    description: 'The device code is unknown, or its token was already delivered (it is delivered once). Start a new signup.',
  },
  'slow-down': {
    code: 'rate_limited',
    title: 'Polling too fast',
    description: 'Poll a signup at most once every `interval` seconds (3).',
  },
  'user-code-unknown': {
    code: 'not_found',
    title: 'No signup has this code',
    description: 'The user code is wrong, or the signup expired. Check the code the agent shows.',
  },
  'too-many-attempts': {
    code: 'rate_limited',
    title: 'Too many wrong codes',
    description: 'Wrong user codes are limited per session and per client address so codes cannot be guessed.',
  },
  'no-token': {
    code: 'no_token',
    title: 'A bearer token is needed',
    description: 'This operation needs `Authorization: Bearer <token>`; a human approves a token through the signup (device) flow.',
  },
  'token-invalid': {
    code: 'token_invalid',
    title: 'The token is not valid',
    description: 'The token is malformed, unknown or revoked. Get a new one through the signup flow.',
  },
  'token-expired': {
    code: 'token_expired',
    title: 'The token has expired',
    description: 'Tokens live 90 days. Get a new one through the signup flow.',
  },
  'scope-required': {
    code: 'scope_required',
    title: 'The token lacks a scope',
    description: 'The token does not hold the scope this operation needs. Scopes are frozen; start a new signup that asks for it.',
  },
  'invalid-event-id': {
    code: 'invalid_request',
    title: 'The Last-Event-ID is not one of ours',
    description: 'A live feed resumes after the `id` of an event it sent. Send that id unchanged as `Last-Event-ID` (or `?last_event_id=`), or leave it out to start from now.',
  },
  'idempotency-key-invalid': {
    code: 'invalid_request',
    title: 'The Idempotency-Key is not valid',
    description: 'An Idempotency-Key is 1 to 255 printable ASCII characters.',
  },
  'idempotency-in-flight': {
    code: 'invalid_request',
    status: 409,
    title: 'The first request with this key is still running',
    description: 'Wait for the first request with this Idempotency-Key to finish, then retry to get its stored answer.',
  },
  'idempotency-mismatch': {
    code: 'invalid_request',
    status: 422,
    title: 'This key was used with another request',
    description: 'An Idempotency-Key is bound to the first body sent with it for 24 hours. Use a new key for a new request.',
  },
  internal: {
    code: 'internal',
    title: 'Something went wrong on our side',
    description: 'An unexpected error. It has been logged with the request id; retrying later may succeed.',
  },
  unavailable: {
    code: 'internal',
    status: 503,
    title: 'A service behind this one is unavailable',
    description: 'Storage or an internal service did not answer in time. Retry with backoff.',
  },
} as const satisfies Record<string, ProblemType>;

export type ProblemSlug = keyof typeof PROBLEM_TYPES;

export function problemStatus(slug: ProblemSlug): number {
  const type: ProblemType = PROBLEM_TYPES[slug];
  return type.status ?? PROBLEM_CODES[type.code];
}

/** Fields a problem may carry beyond the standard ones (`required_scope`, `held_scopes`, ...). */
export type ProblemExtensions = Record<string, string | number | boolean | string[]>;

export interface ProblemInit {
  /** A sentence a program or a person can act on, naming the URL or scope that fixes it. */
  remedy: string;
  detail?: string;
  extensions?: ProblemExtensions;
  /** Response headers that belong to this problem, such as `Retry-After`. */
  headers?: Record<string, string>;
}

/**
 * A domain error: what went wrong in the product's words. It maps to a gRPC status at the service
 * boundary (grpc/status.ts) and to an RFC 9457 problem document at the HTTP boundary (http/problem.ts).
 */
export class DomainError extends Error {
  override readonly name = 'DomainError';
  readonly slug: ProblemSlug;
  readonly remedy: string;
  readonly detail: string | undefined;
  readonly extensions: ProblemExtensions;
  readonly headers: Record<string, string>;

  constructor(slug: ProblemSlug, init: ProblemInit) {
    super(init.detail ?? PROBLEM_TYPES[slug].title);
    this.slug = slug;
    this.remedy = init.remedy;
    this.detail = init.detail;
    this.extensions = init.extensions ?? {};
    this.headers = init.headers ?? {};
  }

  get code(): ProblemCode {
    return PROBLEM_TYPES[this.slug].code;
  }

  get status(): number {
    return problemStatus(this.slug);
  }
}

export function isProblemSlug(value: unknown): value is ProblemSlug {
  return typeof value === 'string' && Object.hasOwn(PROBLEM_TYPES, value);
}

/** The RFC 9457 body of a problem, with `code` and `remedy` as the specification requires. */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  code: ProblemCode;
  remedy: string;
  detail?: string;
  [extension: string]: unknown;
}

export function problemDocument(error: DomainError, siteUrl: string): ProblemDocument {
  return {
    type: `${siteUrl}/problems/${error.slug}`,
    title: PROBLEM_TYPES[error.slug].title,
    status: error.status,
    code: error.code,
    ...(error.detail === undefined ? {} : { detail: error.detail }),
    remedy: error.remedy,
    ...error.extensions,
  };
}
