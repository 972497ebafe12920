import type { ServerEventBus } from '@modelcontextprotocol/server';

/**
 * The change notifications of `{api_url}/mcp` (docs/decisions.md §47): the bus `subscriptions/listen`
 * streams hear, fed from edge's live hub. TEMPORARY stub of the base (an in-process bus nobody
 * publishes to), replaced by its slice.
 */
export function mcpChanges(): { bus: ServerEventBus | undefined; close(): void } {
  return { bus: undefined, close() {} };
}
