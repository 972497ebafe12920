import { isMcpTool } from './carriage.js';
import { type OperationName, OPERATIONS } from './operations.js';

/**
 * The MCP revisions `{api_url}/mcp` serves, newest first: 2026-07-28 by its per-request rules
 * (server/discover, no initialize), the 2025-era ones through initialize (docs/decisions.md §45).
 * Edge's server/discover and UnsupportedProtocolVersion error name exactly these, as do the manifest,
 * llms.txt and /developers.
 */
export const MCP_PROTOCOL_REVISIONS: readonly string[] = ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07'];

/** The name of one of the room's MCP tools. */
export type McpToolName = string;

/**
 * The MCP tools, by name, and the operation each runs, read off the rows that carry a tool, in the
 * table's order: the server's tools/list, the manifest and llms.txt read this one map.
 */
export const MCP_TOOL_OPERATIONS: Readonly<Record<McpToolName, OperationName>> = Object.fromEntries(
  (Object.keys(OPERATIONS) as OperationName[]).flatMap((operation) => {
    const carriage = OPERATIONS[operation].mcp;
    return isMcpTool(carriage) ? [[carriage.tool, operation]] : [];
  }),
);
