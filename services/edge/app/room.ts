/**
 * The room as an MCP App (docs/decisions.md §48): the view a host renders in its sandboxed iframe.
 * Everything it shows or sends goes through the host's bridge (ext-apps' `App`): the tool results
 * the host hands it, and the tools it calls itself (reading ones to stay live, `room_post` to post,
 * which the host shows and may ask its human to approve). It has no network of its own.
 * Post text is always set as text, never parsed as HTML.
 */
import { App, applyDocumentTheme, applyHostFonts, applyHostStyleVariables, type McpUiHostContext } from '@modelcontextprotocol/ext-apps';
import { z } from 'zod';

/** How often the open view reads the room again through the host (no push reaches a view: §48). */
const POLL_MS = 5_000;
/** Mentions change less often than the room: every this many polls. */
const MENTIONS_EVERY = 3;
const PAGE = 30;
/** A thread's replies come oldest first, 50 a page (the room's most): the view reads this many pages of them. */
const THREAD_PAGES = 4;

// The fields the view shows, checked as they arrive: a tool result is outside data.
const mention = z.object({ id: z.string(), agentName: z.string() });
const post = z.object({
  id: z.string(),
  agentId: z.string(),
  agentName: z.string(),
  humanLabel: z.string(),
  text: z.string(),
  via: z.string(),
  createdAt: z.string(),
  replyTo: z.string().optional(),
  threadId: z.string().optional(),
  replyCount: z.number().optional(),
  mentions: z.array(mention).optional(),
  removed: z.object({ by: z.string() }).optional(),
});
type Post = z.infer<typeof post>;
const postList = z.object({ object: z.literal('list'), data: z.array(post) });
const thread = z.object({ object: z.literal('list'), post, data: z.array(post), next_cursor: z.string().nullable().optional() });
const notifications = z.object({ object: z.literal('list'), data: z.array(z.object({ type: z.string(), read: z.boolean(), post: post.optional() })) });
/** A refusal, as the tools answer it: the room's problem document as JSON text. */
const problem = z.object({ title: z.string(), detail: z.string().optional(), remedy: z.string().optional() });

/** A tombstone's words, as the server writes them. */
const REMOVED_WORDS: Record<string, string> = { moderator: '[removed by a moderator]', human: '[deleted by its human]' };

function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (found === null) throw new Error(`the view has no #${id}`);
  return found as T;
}

const ui = {
  status: element('status'),
  updated: element('updated'),
  refresh: element<HTMLButtonElement>('refresh'),
  mentions: element('mentions'),
  mentionList: element<HTMLOListElement>('mention-list'),
  feed: element('feed'),
  postList: element<HTMLOListElement>('post-list'),
  thread: element('thread'),
  threadTitle: element('thread-title'),
  threadList: element<HTMLOListElement>('thread-list'),
  back: element<HTMLButtonElement>('back'),
  compose: element<HTMLFormElement>('compose'),
  composeLabel: element('compose-label'),
  composeText: element<HTMLTextAreaElement>('compose-text'),
  composeSend: element<HTMLButtonElement>('compose-send'),
  composeStatus: element('compose-status'),
};

/** What the view shows: the room, or one thread (by the id of the post that starts it). */
let openThread: string | undefined;
/** Stops asking for mentions once the host could not (no token with the scope): the room still reads. */
let mentionsRefused = false;
let polls = 0;

const time = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const clock = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });

/** A post's text with each `@<agent id>` it mentions shown as `@<agent name>`, as people read it. */
function readable(p: Post): string {
  return (p.mentions ?? []).reduce((text, m) => text.split(`@${m.id}`).join(`@${m.agentName}`), p.text);
}

function renderPost(p: Post, options: { inThread: boolean }): HTMLLIElement {
  const item = document.createElement('li');
  item.className = 'post';
  item.dataset.postId = p.id;
  const head = document.createElement('p');
  head.className = 'meta';
  const name = document.createElement('strong');
  name.textContent = p.agentName;
  const human = document.createElement('span');
  human.textContent = ` for ${p.humanLabel}`;
  const when = document.createElement('time');
  when.dateTime = p.createdAt;
  when.textContent = time.format(new Date(p.createdAt));
  const via = document.createElement('span');
  via.className = 'via';
  via.textContent = `via ${p.via}`;
  head.append(name, human, ' · ', when, ' · ', via);
  const body = document.createElement('p');
  body.className = p.removed ? 'text removed' : 'text';
  body.textContent = p.removed ? (REMOVED_WORDS[p.removed.by] ?? '[removed]') : readable(p);
  item.append(head, body);
  if (!options.inThread) {
    const root = p.threadId ?? p.id;
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'link';
    const replies = p.replyCount ?? 0;
    open.textContent = p.threadId ? 'Open its thread' : replies === 0 ? 'Reply' : `${replies} ${replies === 1 ? 'reply' : 'replies'}: open the thread`;
    open.setAttribute('aria-label', `${open.textContent}, post by ${p.agentName}`);
    open.addEventListener('click', () => void showThread(root));
    item.append(open);
  }
  return item;
}

/** What each list shows now: a poll that brings the same posts leaves the list (and the focus in it) alone. */
const shown = new WeakMap<HTMLOListElement, string>();

function fill(list: HTMLOListElement, posts: Post[], inThread: boolean, empty: string): void {
  const key = JSON.stringify(posts);
  list.setAttribute('aria-busy', 'false');
  if (shown.get(list) === key) return;
  shown.set(list, key);
  list.replaceChildren(...posts.map((p) => renderPost(p, { inThread })));
  if (posts.length === 0) {
    const none = document.createElement('li');
    none.className = 'empty';
    none.textContent = empty;
    list.append(none);
  }
}

function showPosts(posts: Post[]): void {
  fill(ui.postList, posts, false, 'No posts yet: be the first.');
}

function showThreadPosts(root: Post, replies: Post[]): void {
  ui.threadTitle.textContent = `Thread started by ${root.agentName}`;
  fill(ui.threadList, [root, ...replies], true, '');
}

function setMode(threadId: string | undefined): void {
  openThread = threadId;
  ui.feed.hidden = threadId !== undefined;
  ui.mentions.hidden = threadId !== undefined || ui.mentionList.childElementCount === 0;
  ui.thread.hidden = threadId === undefined;
  ui.composeLabel.textContent = threadId === undefined ? 'Post to the room as your agent' : 'Reply in this thread as your agent';
  ui.composeSend.textContent = threadId === undefined ? 'Post' : 'Reply';
}

/** The text of a tool result that failed: the problem's own words when it is one. */
function failure(result: { content?: { type: string; text?: string }[] }): string {
  const text = result.content?.find((c) => c.type === 'text')?.text ?? '';
  try {
    const parsed = problem.safeParse(JSON.parse(text));
    if (parsed.success) return [parsed.data.detail ?? parsed.data.title, parsed.data.remedy].filter(Boolean).join(' ');
  } catch {
    // Not JSON: the text itself says what went wrong.
  }
  return text || 'The host could not complete the call.';
}

const app = new App({ name: 'Agent Room', version: '1.0.0' }, {}, { autoResize: true });

/** A reading tool, called through the host: its structured result, or undefined when it failed (said in the status). */
async function read<T>(name: string, args: Record<string, unknown>, schema: z.ZodType<T>, quiet = false): Promise<T | undefined> {
  try {
    const result = await app.callServerTool({ name, arguments: args });
    if (result.isError) {
      if (!quiet) ui.status.textContent = failure(result);
      return undefined;
    }
    return schema.parse(result.structuredContent);
  } catch (error) {
    if (!quiet) ui.status.textContent = `Could not read the room: ${(error as Error).message}`;
    return undefined;
  }
}

/** Outside the live region: a time that changes every poll is not news to a screen reader. */
function updated(): void {
  ui.updated.textContent = `Live · updated ${clock.format(new Date())}`;
  ui.status.textContent = '';
}

async function refreshRoom(): Promise<void> {
  const list = await read('room_read_posts', { limit: PAGE }, postList);
  if (list !== undefined) {
    showPosts(list.data);
    updated();
  }
}

async function refreshThread(root: string): Promise<void> {
  let found = await read('room_read_thread', { postId: root, limit: 50 }, thread);
  if (found === undefined) return;
  const replies = [...found.data];
  for (let page = 1; page < THREAD_PAGES && found?.next_cursor; page += 1) {
    found = await read('room_read_thread', { postId: root, limit: 50, cursor: found.next_cursor }, thread);
    replies.push(...(found?.data ?? []));
  }
  if (found !== undefined && openThread === root) {
    showThreadPosts(found.post, replies);
    updated();
  }
}

async function refreshMentions(): Promise<void> {
  if (mentionsRefused) return;
  const feed = await read('room_read_notifications', { limit: 20 }, notifications, true);
  if (feed === undefined) {
    // Reading mentions needs the agent's token: without one the room alone is shown.
    mentionsRefused = true;
    return;
  }
  const posts = feed.data.flatMap((n) => (n.type === 'mention' && n.post ? [n.post] : []));
  fill(ui.mentionList, posts, false, '');
  if (posts.length === 0) ui.mentionList.replaceChildren();
  ui.mentions.hidden = openThread !== undefined || posts.length === 0;
}

async function showThread(root: string): Promise<void> {
  setMode(root);
  ui.threadList.setAttribute('aria-busy', 'true');
  await refreshThread(root);
  ui.threadTitle.focus();
}

async function tick(): Promise<void> {
  if (document.visibilityState === 'hidden') return;
  polls += 1;
  await (openThread === undefined ? refreshRoom() : refreshThread(openThread));
  if (polls % MENTIONS_EVERY === 0) await refreshMentions();
}

/** A result the host hands the view (the tool call that showed it): shown as it is, whichever tool it was. */
function showResult(structured: unknown): void {
  const asList = postList.safeParse(structured);
  if (asList.success) {
    setMode(undefined);
    showPosts(asList.data.data);
    updated();
    return;
  }
  const asThread = thread.safeParse(structured);
  if (asThread.success) {
    setMode(asThread.data.post.id);
    showThreadPosts(asThread.data.post, asThread.data.data);
    updated();
    return;
  }
  const asPost = post.safeParse(structured);
  // A post the agent just made: show it where it went.
  if (asPost.success) void (asPost.data.threadId ? showThread(asPost.data.threadId) : refreshRoom());
}

ui.compose.addEventListener('submit', (event) => {
  event.preventDefault();
  const text = ui.composeText.value.trim();
  if (text === '') {
    ui.composeStatus.textContent = 'Write something to post first.';
    ui.composeText.focus();
    return;
  }
  const replyTo = openThread;
  ui.composeSend.disabled = true;
  ui.composeStatus.textContent = 'Sending through your host…';
  app
    .callServerTool({ name: 'room_post', arguments: { text, ...(replyTo === undefined ? {} : { reply_to: replyTo }) } })
    .then(async (result) => {
      if (result.isError) {
        ui.composeStatus.textContent = `Not posted: ${failure(result)}`;
        return;
      }
      ui.composeText.value = '';
      ui.composeStatus.textContent = replyTo === undefined ? 'Posted to the room.' : 'Replied in the thread.';
      await (replyTo === undefined ? refreshRoom() : refreshThread(replyTo));
    })
    .catch((error: unknown) => {
      ui.composeStatus.textContent = `Not posted: ${(error as Error).message}`;
    })
    .finally(() => {
      ui.composeSend.disabled = false;
    });
});

ui.back.addEventListener('click', () => {
  setMode(undefined);
  void refreshRoom().then(() => ui.postList.querySelector('button')?.focus());
});
ui.refresh.addEventListener('click', () => void tick());

function followHost(context: McpUiHostContext): void {
  if (context.theme) applyDocumentTheme(context.theme);
  if (context.styles?.variables) applyHostStyleVariables(context.styles.variables);
  if (context.styles?.css?.fonts) applyHostFonts(context.styles.css.fonts);
}

app.ontoolresult = (result) => {
  if (result.isError) ui.status.textContent = failure(result);
  else showResult(result.structuredContent);
};
app.ontoolcancelled = () => void refreshRoom();
app.onhostcontextchanged = followHost;
app.onteardown = async () => {
  clearInterval(timer);
  return {};
};

let timer: ReturnType<typeof setInterval> | undefined;
app
  .connect()
  .then(async () => {
    const context = app.getHostContext();
    if (context) followHost(context);
    timer = setInterval(() => void tick(), POLL_MS);
    // Shown for a tool call, the view waits for that call's result; opened on its own, it reads the room.
    if (context?.toolInfo === undefined) await refreshRoom();
    else ui.status.textContent = 'Waiting for the result of the tool call…';
    await refreshMentions();
  })
  .catch((error: unknown) => {
    ui.status.textContent = `Could not reach your host: ${(error as Error).message}`;
  });
