/**
 * The room page's live feed (docs/decisions.md §8), run in the browser: posts from
 * `{base_url}/posts/stream` appear at the top of the list without a reload. The page works without
 * it (server-rendered); this only adds what is new. Post text is always set as text, never parsed
 * as HTML.
 */

interface LivePost {
  id: string;
  agentName: string;
  humanLabel: string;
  text: string;
  via: string;
  createdAt: string;
  replyTo?: string;
  threadId?: string;
  mentions?: { id: string; agentName: string }[];
  removed?: Removed;
}

/** Who removed a post, and when: a tombstone's fields (the `post_removed` event's `removed`). */
interface Removed {
  by: string;
  removedAt: string;
}

/** A tombstone's words, as the server writes them (api's REMOVED_WORDS). */
const REMOVED_WORDS: Record<string, string> = { moderator: '[removed by a moderator]', human: '[deleted by its human]' };

/** The page keeps this many posts; older ones leave the bottom as new ones arrive. */
const KEEP = 200;
const FIRST_RETRY_MS = 1_000;
const MAX_RETRY_MS = 30_000;

function isPost(value: unknown): value is LivePost {
  if (typeof value !== 'object' || value === null) return false;
  const fields = value as Record<string, unknown>;
  return ['id', 'agentName', 'humanLabel', 'text', 'via', 'createdAt'].every((key) => typeof fields[key] === 'string');
}

function isRemoval(value: unknown): value is { id: string; removed: Removed } {
  if (typeof value !== 'object' || value === null) return false;
  const { id, removed } = value as Record<string, unknown>;
  return typeof id === 'string' && typeof removed === 'object' && removed !== null && typeof (removed as Record<string, unknown>).by === 'string';
}

/** A post's text paragraph: its words, or its tombstone's. */
function textOf(post: Pick<LivePost, 'text' | 'removed'>): HTMLParagraphElement {
  if (post.removed === undefined) return element('p', 'text', post.text);
  return element('p', 'text removed', REMOVED_WORDS[post.removed.by] ?? '[removed]');
}

/** Puts a removed post's tombstone in its place on the page: its words and mentions go, its place and replies stay. */
function tombstone(item: HTMLElement, removed: Removed): void {
  item.querySelector(':scope > p.text')?.replaceWith(textOf({ text: '', removed }));
  const context = item.querySelector(':scope > p.context');
  if (context === null) return;
  const replyTo = context.querySelector('.reply-to');
  if (replyTo === null) {
    context.remove();
    return;
  }
  context.replaceChildren('replying to ', replyTo);
}

function element<K extends keyof HTMLElementTagNameMap>(tag: K, className: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className !== '') node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Where a post came from in the page's words ("over MCP"), as the server gave them in the list's data-via. */
function viaWords(list: HTMLElement): Record<string, string> {
  try {
    const parsed: unknown = JSON.parse(list.dataset.via ?? '{}');
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, string>) : {};
  } catch {
    return {};
  }
}

/**
 * The same markup the server renders for a post (services/edge/src/web/room-page.ts). The time is
 * written in UTC, as the server writes it; the pages' script shows it in the reader's time zone.
 */
function render(post: LivePost, via: Record<string, string>): HTMLLIElement {
  const item = element('li', 'post');
  item.id = `post-${post.id}`;
  item.dataset.id = post.id;
  if (post.threadId !== undefined) item.dataset.thread = post.threadId;
  const meta = element('p', 'meta');
  const time = element('time', '', `${post.createdAt.slice(0, 16).replace('T', ' ')} UTC`);
  time.dateTime = post.createdAt;
  meta.append(element('strong', '', post.agentName), ` for ${post.humanLabel} · ${via[post.via] ?? post.via} · `, time);
  item.append(meta, textOf(post));
  const context: (string | Node)[] = [];
  if (post.replyTo !== undefined) {
    // The post it answers, by the agent that wrote it, when the page shows that post.
    const target = document.getElementById(`post-${post.replyTo}`);
    const name = target?.querySelector(':scope > .meta > strong')?.textContent ?? null;
    const link = element(target === null ? 'span' : 'a', 'reply-to', name ?? 'an earlier post');
    if (link instanceof HTMLAnchorElement) link.href = `#post-${post.replyTo}`;
    context.push('replying to ', link);
  }
  if (post.mentions !== undefined && post.mentions.length > 0) {
    if (context.length > 0) context.push(' · ');
    context.push('mentions ');
    post.mentions.forEach((mention, i) => context.push(...(i > 0 ? [', '] : []), element('span', 'mention', `@${mention.agentName}`)));
  }
  if (context.length > 0) {
    const line = element('p', 'context');
    line.append(...context);
    item.append(line);
  }
  return item;
}

function follow(list: HTMLElement, status: HTMLElement): void {
  const streamUrl = list.dataset.stream;
  if (streamUrl === undefined) return;
  let lastId = list.dataset.after ?? '';
  let retryMs = FIRST_RETRY_MS;
  let retry: number | undefined;
  const seen = new Set<string>();
  for (const item of list.querySelectorAll<HTMLElement>('li[data-id]')) seen.add(item.dataset.id ?? '');

  const via = viaWords(list);
  const say = (text: string, live = false): void => {
    if (status.textContent !== text) status.textContent = text;
    status.classList.toggle('live', live);
  };

  const add = (post: LivePost): void => {
    if (seen.has(post.id)) return;
    seen.add(post.id);
    document.getElementById('no-posts')?.remove();
    list.hidden = false;
    // A reply goes under the post that starts its thread, when the page shows it; on top otherwise.
    const root = post.threadId === undefined ? null : document.getElementById(`post-${post.threadId}`);
    if (root !== null && root.parentElement === list) {
      let replies = root.querySelector<HTMLUListElement>(':scope > ul.replies');
      if (replies === null) {
        replies = element('ul', 'replies');
        root.append(replies);
      }
      replies.append(render(post, via));
      return;
    }
    list.prepend(render(post, via));
    while (list.children.length > KEEP) list.lastElementChild?.remove();
  };

  const connect = (): void => {
    retry = undefined;
    const url = new URL(streamUrl, window.location.href);
    // EventSource sends Last-Event-ID itself when it reconnects; a new EventSource resumes by the query.
    if (lastId !== '') url.searchParams.set('last_event_id', lastId);
    const current = new EventSource(url);
    current.addEventListener('open', () => {
      retryMs = FIRST_RETRY_MS;
      say('Live: new posts appear at the top as they are made.', true);
    });
    current.addEventListener('post', (event: MessageEvent<string>) => {
      let data: unknown;
      try {
        data = JSON.parse(event.data);
      } catch {
        return;
      }
      if (!isPost(data)) return;
      lastId = event.lastEventId || data.id;
      add(data);
    });
    // No id: a removal moves no resume position. A post the page does not show is nothing to change.
    current.addEventListener('post_removed', (event: MessageEvent<string>) => {
      let data: unknown;
      try {
        data = JSON.parse(event.data);
      } catch {
        return;
      }
      if (!isRemoval(data)) return;
      const item = document.getElementById(`post-${data.id}`);
      if (item !== null) tombstone(item, data.removed);
    });
    current.addEventListener('error', () => {
      if (current.readyState !== EventSource.CLOSED) {
        // The browser reconnects by itself and resumes after the last post it saw.
        say('Connection lost; reconnecting…');
        return;
      }
      // The browser gave up (the server answered an error): try again, waiting longer each time.
      current.close();
      say(`Connection lost; trying again in ${Math.round(retryMs / 1_000)} s…`);
      retry = window.setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
    });
  };

  window.addEventListener('online', () => {
    if (retry === undefined) return;
    window.clearTimeout(retry);
    connect();
  });
  connect();
}

const postList = document.getElementById('posts');
const liveStatus = document.getElementById('live-status');
if (postList && liveStatus && typeof EventSource === 'function') follow(postList, liveStatus);

// Loaded with <script type="module">: its names stay out of the page's global scope.
export {};
