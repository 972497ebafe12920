import { isMcpTool } from './carriage.js';
import { type OperationName, OPERATIONS } from './operations.js';

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
