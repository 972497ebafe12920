import type { Logger } from '@agentroom/kit/log';
import type { Admission, Core } from '../operations/core.js';
import type { Surface } from '../operations/surface.js';

/**
 * What every part of `{api_url}/mcp`'s server is registered with (server.ts builds it; tools,
 * resources, prompts, subscriptions and the App each take it): kept apart so none of them imports
 * the factory that imports them.
 */

/** A 2025-11-25 session's subscriptions, as `resources/subscribe` and `resources/unsubscribe` change them. */
export interface SessionSubscriptions {
  subscribe(id: string, uri: string, caller: string): Promise<void>;
  unsubscribe(id: string, uri: string, caller: string): Promise<void>;
}

/** What one MCP request is served with: who asks, and how (handed from the route to the factory through AuthInfo's `extra`). */
export interface McpCall {
  admission: Admission;
  /** The POST said `Cache-Control: no-cache`, which reading tools and resources honour as REST does. */
  readThrough: boolean;
  /** The 2025-11-25 session the request names (`Mcp-Session-Id`), for its subscriptions (docs/decisions.md §47). */
  session?: string;
}

/** Everything a server instance is built from: fixed for the process. */
export interface McpServerDeps {
  core: Core;
  surface: Surface;
  version: string;
  log: Logger;
  /** The 2025-11-25 sessions that `resources/subscribe` and `resources/unsubscribe` change (mcp/sessions.ts, LegacySessions). */
  sessions?: SessionSubscriptions;
}

/** What each slice's `register…` receives: the process's dependencies and the request's caller. */
export interface McpRegistration extends McpServerDeps {
  call: McpCall;
}
