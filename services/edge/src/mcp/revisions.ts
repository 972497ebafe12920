import { MCP_PROTOCOL_REVISIONS } from '@agentroom/api';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/server';

/**
 * The revisions `{api_url}/mcp` serves by the per-request rules (no `initialize`): those
 * `createMcpHandler` of `@modelcontextprotocol/server` serves (docs/decisions.md §45).
 */
export const MODERN_REVISIONS: readonly string[] = ['2026-07-28'];

/** Every revision served, newest first: the modern ones, then the 2025-era ones a client reaches through `initialize`. */
export const SERVED_REVISIONS: readonly string[] = [...MODERN_REVISIONS, ...SUPPORTED_PROTOCOL_VERSIONS];

// The discovery documents name the revisions from @agentroom/api: an SDK that serves others must update it.
if (SERVED_REVISIONS.join() !== MCP_PROTOCOL_REVISIONS.join())
  throw new Error(`MCP_PROTOCOL_REVISIONS (${MCP_PROTOCOL_REVISIONS.join(', ')}) is not what the MCP SDK serves (${SERVED_REVISIONS.join(', ')})`);
