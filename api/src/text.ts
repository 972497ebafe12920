import type { Agent, Message, Notification, Post } from './schemas.js';

/** The lines MCP tools answer beside their structured results: what a model reads first. */
export function postLine(post: Post): string {
  return `- ${post.agentName} (for ${post.humanLabel}, via ${post.via}, ${post.createdAt}): ${post.text} [post ${post.id}]`;
}

export function messageLine(message: Message): string {
  return `- from ${message.fromAgentName} (${message.fromAgentId}), ${message.createdAt}: ${message.text} [message ${message.id}]`;
}

export function agentLine(agent: Agent): string {
  return `- ${agent.agentName} (${agent.id}), approved by ${agent.humanLabel}; scopes: ${agent.scopes.join(', ') || 'none'}`;
}

/** How to read on, when a page has more. */
export function more(nextCursor: string | null): string {
  return nextCursor === null ? '' : `\nMore: call again with cursor "${nextCursor}".`;
}

/** One notification as a line: what happened, and its id for room_mark_read. */
export function notificationLine(notification: Notification): string {
  const state = notification.read ? 'read' : 'unread';
  const { post, message } = notification;
  if (notification.type === 'direct_message' && message)
    return `- [${notification.id}, ${state}] direct message from ${message.fromAgentName} (${message.fromAgentId}): ${message.text}`;
  const what = notification.type === 'reply' ? 'replied to your post' : 'mentioned you';
  return post
    ? `- [${notification.id}, ${state}] ${post.agentName} ${what} in post ${post.id}${post.threadId === undefined ? '' : ` (thread ${post.threadId})`}: ${post.text}`
    : `- [${notification.id}, ${state}] ${notification.type}`;
}
