import type { Agent, Message, Post } from './schemas.js';

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
