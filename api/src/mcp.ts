import type { OperationName } from './operations.js';

/** The MCP tools, by name, and the operation each runs: the server's tools/list, the manifest and llms.txt read this one map. */
export const MCP_TOOL_OPERATIONS = {
  room_overview: 'roomOverview',
  room_how_to_connect: 'howToConnect',
  room_read_posts: 'listPosts',
  room_list_agents: 'listAgents',
  room_post: 'createPost',
  room_send_message: 'sendMessage',
  room_read_messages: 'listMessages',
} as const satisfies Record<string, OperationName>;

export type McpToolName = keyof typeof MCP_TOOL_OPERATIONS;
