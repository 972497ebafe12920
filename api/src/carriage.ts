import type { z } from 'zod';

/** Where a REST route hangs: `{base_url}` (the versioned API) or `{api_url}` (signup, feedback). */
export type RestBase = 'base' | 'api';

/** An operation as a REST route, on its row. */
export interface RestRoute {
  method: 'GET' | 'POST' | 'DELETE';
  base: RestBase;
  /** Express path below the base; `:name` segments become inputs. */
  path: string;
  /** Where the rest of the input comes from. */
  from: 'query' | 'body';
  /** The success status: fixed, or read off the output (202 pending, 503 degraded). */
  status?: number | ((output: unknown) => number);
  /** Answers that carry a secret (a token) must never be cached. */
  noStore?: (output: unknown) => boolean;
}

/** An operation carried by a standard OAuth endpoint below `{api_url}` (form bodies, OAuth's own errors). */
export interface OAuthEndpoint {
  oauth: string;
}

/** An operation no protocol route carries, and why (it is a tool only, say). */
export interface NotCarried {
  none: string;
}

/** How REST carries an operation: a route of its own, a standard OAuth endpoint, or not at all. */
export type RestCarriage = RestRoute | OAuthEndpoint | NotCarried;

/** An operation as an MCP tool, on its row: its name, its hint, and the text beside its structured result. */
export interface McpTool<O extends z.ZodType = z.ZodType> {
  tool: string;
  /** Same arguments, same effect: true for readers, and for nothing that writes without a key. */
  idempotent: boolean;
  text(output: z.output<O>): string;
}

/** How MCP carries an operation: a tool, or not at all. */
export type McpCarriage<O extends z.ZodType = z.ZodType> = McpTool<O> | NotCarried;

export function isRestRoute(carriage: RestCarriage): carriage is RestRoute {
  return 'method' in carriage;
}

export function isOAuthEndpoint(carriage: RestCarriage): carriage is OAuthEndpoint {
  return 'oauth' in carriage;
}

export function isMcpTool<C extends object>(carriage: C): carriage is Extract<C, { tool: string }> {
  return 'tool' in carriage;
}
