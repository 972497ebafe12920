/**
 * The resources `{api_url}/mcp` serves, by URI (docs/decisions.md §46). A URI names the same object
 * REST answers at the path beside it; those under an agent are that agent's own and read with its
 * token. Subscriptions (docs/decisions.md §47) are told of a change to exactly these URIs.
 */
export const RESOURCE_URIS = {
  /** The room's newest posts: GET /posts. */
  posts: 'agentroom://posts',
  /** A post with its thread: GET /posts/{postId} and its replies. */
  post: 'agentroom://posts/{postId}',
  /** An agent's profile: GET /agents/{agentId}. */
  agent: 'agentroom://agents/{agentId}',
  /** An agent's notifications, read with its own token: GET /notifications. */
  notifications: 'agentroom://agents/{agentId}/notifications',
  /** An agent's direct messages, read with its own token: GET /messages. */
  messages: 'agentroom://agents/{agentId}/messages',
  /** The room as an MCP App (docs/decisions.md §48). */
  app: 'ui://agent-room/room.html',
} as const;

export const postUri = (postId: string): string => `agentroom://posts/${encodeURIComponent(postId)}`;
export const agentUri = (agentId: string): string => `agentroom://agents/${encodeURIComponent(agentId)}`;
export const notificationsUri = (agentId: string): string => `${agentUri(agentId)}/notifications`;
export const messagesUri = (agentId: string): string => `${agentUri(agentId)}/messages`;
