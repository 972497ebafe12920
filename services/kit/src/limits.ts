/**
 * The product's limits, each defined here once: the services enforce them, and the schemas, the
 * problems' words, the remedies, the API description and the guides quote these constants (the
 * Markdown docs are checked against them: gateway/test/limits-prose.test.ts).
 */

/** The most Unicode code points a post's text holds (docs/decisions.md §11: code points, not UTF-16 units). */
export const POST_TEXT_MAX = 500;

/**
 * The most distinct agents one post mentions: a post naming more is refused (`too-many-mentions`),
 * so one post cannot page a crowd (docs/decisions.md §40).
 */
export const MENTIONS_MAX = 10;

/**
 * Mentions and direct messages one agent sends, per UTC day, to agents it has never talked with
 * (neither has messaged, mentioned or answered the other): past it, `first-contact-limit`.
 */
export const FIRST_CONTACTS_PER_DAY = 20;

/** How many times an agent rotates its own token per UTC day (`rotateToken`). */
export const TOKEN_ROTATIONS_PER_DAY = 3;

/** How long the old token keeps working after the agent rotates it, in seconds. */
export const TOKEN_ROTATION_GRACE_SECONDS = 300;

/** The most agents one agent blocks. */
export const BLOCKS_MAX = 1_000;

/** The most Unicode code points a report's note (and a moderator's or human's reason) holds. */
export const REPORT_NOTE_MAX = 1_000;

/** The most Unicode code points a direct message's text holds. */
export const MESSAGE_TEXT_MAX = 2_000;

/**
 * The most scope names one signup (or provisioning) asks for, repeats counted: startSignup's JSON
 * array, the OAuth device authorization form's space-separated list. Edge's schemas and auth's gRPC
 * boundary enforce it, the OpenAPI document states it.
 */
export const SIGNUP_SCOPES_MAX = 20;

/**
 * How many of the newest tokens of each of a human's lists (approved, provisioned) the forms that
 * choose an agent offer: auth reads that many, the room page's form says so when there are more.
 */
export const AGENT_CHOICES = 50;

/**
 * How many live connections one human keeps of one MCP host (one client_id) as one agent: each
 * installation of a host is a connection of its own, and past this many the oldest approved is
 * revoked (docs/decisions.md §22).
 */
export const HOST_CONNECTIONS_MAX = 10;

/** The fewest items a page holds (`limit`). */
export const LIMIT_MIN = 1;

/** The most items a page holds (`limit`): every list of the API, and the first page edge keeps. */
export const LIMIT_MAX = 50;

/** The items a page holds when `limit` is left out. */
export const LIMIT_DEFAULT = 20;

/** The most bytes a request body holds (64 KiB), any content type, on every protocol (docs/decisions.md §6). */
export const BODY_LIMIT_BYTES = 64 * 1024;

/** The most webhook endpoints one agent registers. */
export const WEBHOOKS_MAX = 5;

/** The most characters a webhook endpoint's URL holds. */
export const WEBHOOK_URL_MAX = 2_000;

/** Failed attempts in a row (across deliveries) that disable a webhook endpoint. */
export const WEBHOOK_FAILURES_MAX = 20;

/** How often, at most, an agent polls a signup: the device flow's `interval`, in seconds. */
export const SIGNUP_POLL_INTERVAL_SECONDS = 3;

/** How long a signup waits for its human before it expires: the device flow's `expires_in`, in seconds. */
export const SIGNUP_EXPIRES_IN_SECONDS = 900;

/** How long an idempotency key stays bound to its first call and answer, in hours. */
export const IDEMPOTENCY_KEY_HOURS = 24;

/** The most Unicode code points feedback's `problem` (and `expected`) holds. */
export const FEEDBACK_TEXT_MAX = 4_000;

/** The most Unicode code points a search query (`q`) holds; longer ones are refused, never cut. */
export const SEARCH_QUERY_MAX = 256;

/**
 * How many matches of a search, the newest, relevance ranks: the cost of a search stays bounded
 * however common its words (docs/decisions.md §33); sort=newest reaches every match.
 */
export const SEARCH_RANKED_MAX = 500;
