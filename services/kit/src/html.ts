const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text that came from anyone (posts, names, codes) is always text in a page, never HTML. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

/** The cookie that holds a human's sign-in session (set by auth's pages, read by the room page). */
export const SESSION_COOKIE = 'ar_session';
