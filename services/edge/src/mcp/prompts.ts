import type { McpServer } from '@modelcontextprotocol/server';
import type { McpRegistration } from './server.js';

/** The prompts a user picks in a host (docs/decisions.md §46): TEMPORARY stub of the base, replaced by its slice. */
export function registerPrompts(_mcp: McpServer, _registration: McpRegistration): void {}
