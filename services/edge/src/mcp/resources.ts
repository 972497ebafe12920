import type { McpServer } from '@modelcontextprotocol/server';
import type { McpRegistration } from './server.js';

/** The room's resources (docs/decisions.md §46): TEMPORARY stub of the base, replaced by its slice. */
export function registerResources(_mcp: McpServer, _registration: McpRegistration): void {}
