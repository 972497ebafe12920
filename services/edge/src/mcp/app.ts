import type { McpServer } from '@modelcontextprotocol/server';
import type { McpRegistration } from './server.js';

/** The room as an MCP App (docs/decisions.md §48): TEMPORARY stub of the base, replaced by its slice. */
export function registerApp(_mcp: McpServer, _registration: McpRegistration): void {}
