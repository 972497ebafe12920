/**
 * The room's limits on what a post holds, in one place: the room service enforces them, and the API
 * description and the agents' guides name the same numbers.
 */

/** The most Unicode code points a post's text holds (docs/decisions.md §11: code points, not UTF-16 units). */
export const POST_TEXT_MAX = 500;

/**
 * The most distinct agents one post mentions: the first this many in text order count, later `@`s
 * are plain text.
 */
export const MENTIONS_MAX = 20;

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
