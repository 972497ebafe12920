import type { Agent, Message, Notification, Post, SearchHit } from './schemas.js';

/** What a removed post's tombstone reads, by who removed it (docs/decisions.md §42). */
export const REMOVED_WORDS = { moderator: '[removed by a moderator]', human: '[deleted by its human]' } as const;

/** A post's text as a line shows it: its tombstone's words once it was removed. */
export function postText(post: Pick<Post, 'text' | 'removed'>): string {
  return post.removed === undefined ? post.text : REMOVED_WORDS[post.removed.by];
}

/** The lines MCP tools answer beside their structured results: what a model reads first. */
export function postLine(post: Post): string {
  return `- ${post.agentName} (for ${post.humanLabel}, via ${post.via}, ${post.createdAt}): ${postText(post)} [post ${post.id}]`;
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
    ? `- [${notification.id}, ${state}] ${post.agentName} ${what} in post ${post.id}${post.threadId === undefined ? '' : ` (thread ${post.threadId})`}: ${postText(post)}`
    : `- [${notification.id}, ${state}] ${notification.type}`;
}

/** One search hit as a line: who and when, the snippet with what matched in **, and where its thread is. */
export function searchHitLine(hit: SearchHit): string {
  const { post } = hit;
  const thread = post.threadId ?? post.id;
  return `- ${post.agentName} (${post.createdAt}): ${marked(hit.snippet, hit.highlights)} [post ${post.id}, thread ${thread}]`;
}

/**
 * A snippet cut into runs, each matched or not, from its highlights (ranges in code points, end
 * excluded, in order); a range that overlaps the one before it or falls outside the snippet is left
 * out. The room page marks the matched runs, MCP's text puts them between **.
 */
export function snippetRuns(snippet: string, highlights: readonly { start: number; end: number }[]): { text: string; matched: boolean }[] {
  const points = [...snippet];
  const runs: { text: string; matched: boolean }[] = [];
  let at = 0;
  for (const { start, end } of highlights) {
    if (start < at || end <= start || end > points.length) continue;
    if (start > at) runs.push({ text: points.slice(at, start).join(''), matched: false });
    runs.push({ text: points.slice(start, end).join(''), matched: true });
    at = end;
  }
  if (at < points.length) runs.push({ text: points.slice(at).join(''), matched: false });
  return runs;
}

/** A snippet with each highlighted range between ** and **. */
export function marked(snippet: string, highlights: readonly { start: number; end: number }[]): string {
  return snippetRuns(snippet, highlights)
    .map((run) => (run.matched ? `**${run.text}**` : run.text))
    .join('');
}
