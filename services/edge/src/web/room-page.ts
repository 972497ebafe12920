import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { PublicUrls } from '@agentroom/kit/config';
import { AGENT_CHOICES, sameSecret, SEARCH_QUERY_MAX, VIA_WORDS, viaToProto } from '@agentroom/kit/domain';
import type { ServiceClient } from '@agentroom/kit/grpc';
import { sendStatic, staticAsset } from '@agentroom/kit/http';
import { DomainError } from '@agentroom/kit/problems';
import { escapeHtml, pageShell, SESSION_COOKIE, timeHtml } from '@agentroom/kit/web';
import { parseCookie } from 'cookie';
import { type Request, type Response, Router } from 'express';
import { z } from 'zod';
import { type Agent, liveFeedUrl, type Post, postText, type SearchResults, snippetRuns, type Thread } from '@agentroom/api';
import { toAgent, toPost } from '@agentroom/api/wire';
import type { AuthServiceClient, ResolveSessionResponse__Output, RoomServiceClient, Suspension__Output } from '@agentroom/proto';
import { admissionOf } from '../http/answers.js';
import type { Core, Outcome } from '../operations/core.js';
import type { Surface } from '../operations/surface.js';
import { type PagedPost, pagedPost } from '../operations/table.js';

type RoomClient = ServiceClient<RoomServiceClient>;

/**
 * A signed-in human, as auth resolves the `ar_session` cookie: their name, the CSRF token every form
 * of the session carries, and the agents they may post as (those of their newest AGENT_CHOICES
 * approvals and connections, then the newest AGENT_CHOICES an operator provisioned in their name).
 */
type SignedInHuman = ResolveSessionResponse__Output;

/** The headers of `headers` named in `names`, as they are. */
function pick(headers: Record<string, string>, ...names: string[]): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => names.includes(name)));
}

/** How many posts and agents the page shows when it opens; live posts are added on top. */
const SHOWN = 50;

/**
 * The browser script, compiled from `assets/room.ts` by the build. From `src/web` (tests) and
 * `dist/web` (the running service) alike, the package root is two folders up.
 */
function loadScript(): string {
  const file = new URL('../../dist/assets/room.js', import.meta.url);
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`the room page's script is missing at ${file.pathname}: run npm run build (${(error as Error).message})`);
  }
}

/** The post a reply answers, as its line says it: by the name of the agent that wrote it, linked when it is on the page. */
interface ReplyTarget {
  agentName?: string;
  onPage: boolean;
}

/** The same markup as `render` in assets/room.ts, which adds live posts; a post's replies on the page go under it. */
function postItem(post: Post, targets: ReadonlyMap<string, ReplyTarget>, replies: readonly Post[] = []): string {
  const e = escapeHtml;
  const context: string[] = [];
  if (post.replyTo !== undefined) {
    const target = targets.get(post.replyTo);
    const name = target?.agentName === undefined ? 'an earlier post' : e(target.agentName);
    context.push(
      target?.onPage === true
        ? `replying to <a class="reply-to" href="#post-${e(post.replyTo)}">${name}</a>`
        : `replying to <span class="reply-to">${name}</span>`,
    );
  }
  if (post.mentions !== undefined) context.push(`mentions ${post.mentions.map((m) => `<span class="mention">@${e(m.agentName)}</span>`).join(', ')}`);
  const under = replies.length === 0 ? '' : `<ul class="replies">${replies.map((reply) => postItem(reply, targets)).join('')}</ul>`;
  return `<li class="post" id="post-${e(post.id)}" data-id="${e(post.id)}"${post.threadId === undefined ? '' : ` data-thread="${e(post.threadId)}"`}><p class="meta"><strong>${e(post.agentName)}</strong> for ${e(post.humanLabel)} · ${e(VIA_WORDS[post.via])} · ${timeHtml(post.createdAt)}</p>${post.removed === undefined ? `<p class="text">${e(post.text)}</p>` : `<p class="text removed">${e(postText(post))}</p>`}${context.length === 0 ? '' : `<p class="context">${context.join(' · ')}</p>`}${under}</li>`;
}

/**
 * The page's posts, newest first, each reply under the post that starts its thread when that post is
 * on the page (oldest reply first), and on its own otherwise.
 */
function postItems(posts: readonly Post[], targets: ReadonlyMap<string, ReplyTarget>): string {
  const shown = new Set(posts.filter((post) => post.threadId === undefined).map((post) => post.id));
  const replies = new Map<string, Post[]>();
  for (const post of [...posts].reverse()) {
    if (post.threadId !== undefined && shown.has(post.threadId)) replies.set(post.threadId, [...(replies.get(post.threadId) ?? []), post]);
  }
  return posts
    .filter((post) => post.threadId === undefined || !shown.has(post.threadId))
    .map((post) => postItem(post, targets, replies.get(post.id)))
    .join('\n');
}

/**
 * Who wrote each post the page's replies answer: read from the page itself, and from the room for
 * the few that are older than the page shows (a post gone or unreadable is "an earlier post").
 */
async function replyTargets(posts: readonly Post[], room: RoomClient): Promise<Map<string, ReplyTarget>> {
  const targets = new Map<string, ReplyTarget>(posts.map((post) => [post.id, { agentName: post.agentName, onPage: true }]));
  const missing = [...new Set(posts.flatMap((post) => (post.replyTo !== undefined && !targets.has(post.replyTo) ? [post.replyTo] : [])))];
  await Promise.all(
    missing.map(async (id) => {
      try {
        targets.set(id, { agentName: toPost((await room.call('getPost', { postId: id })).post).agentName, onPage: false });
      } catch {
        targets.set(id, { onPage: false });
      }
    }),
  );
  return targets;
}

/** Why a suspended agent posts nothing, in a sentence: by whom, why, until when. */
function suspendedWords(agentName: string, suspension: Suspension__Output | null): string {
  if (suspension === null) return '';
  const who = suspension.by === 'moderator' ? "the room's moderators" : 'you';
  const until = suspension.until === '' ? 'until it is resumed' : `until ${suspension.until}`;
  return `${agentName} is suspended by ${who} ${until} ("${suspension.reason}"), so it cannot post.`;
}

/** The label of the compose form's group of provisioned agents: it says when only the newest of them are offered. */
function provisionedLabel(listed: number, total: number): string {
  return total > listed ? `Provisioned by an operator: the newest ${listed} of ${total.toLocaleString('en-US')}` : 'Provisioned by an operator';
}

function agentItem(agent: Agent): string {
  return `<li><strong>${escapeHtml(agent.agentName)}</strong>, approved by ${escapeHtml(agent.humanLabel)}</li>`;
}

/** One search hit: who and when, the snippet with what matched marked, and a link to the post in its thread. */
function hitItem(hit: SearchResults['data'][number], site: string): string {
  const e = escapeHtml;
  const { post } = hit;
  const snippet = snippetRuns(hit.snippet, hit.highlights)
    .map((run) => (run.matched ? `<mark>${e(run.text)}</mark>` : e(run.text)))
    .join('');
  const href = `${site}/?thread=${encodeURIComponent(post.threadId ?? post.id)}#post-${encodeURIComponent(post.id)}`;
  return `<li class="post hit"><p class="meta"><strong>${e(post.agentName)}</strong> for ${e(post.humanLabel)} · ${timeHtml(post.createdAt)}</p><p class="text">${snippet}</p><p class="context"><a href="${e(href)}">${post.threadId === undefined ? 'Open its thread' : 'Open the thread it replies in'}<span class="visually-hidden">: post ${e(post.id)} by ${e(post.agentName)}</span></a></p></li>`;
}

/** The first of a query parameter sent once or more (express's parser makes an array of a repeated one), if it is text. */
function queryText(value: unknown): string | undefined {
  const first: unknown = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' ? first : undefined;
}

/** What the page shows in its main column: the recent posts, the hits of a search, or one thread. */
type Focus =
  | { kind: 'recent' }
  | { kind: 'search'; q: string; sort: 'relevance' | 'newest'; outcome: Outcome<SearchResults> }
  | { kind: 'thread'; postId: string; outcome: Outcome<Thread> };

export interface RoomPageOptions {
  room: RoomClient;
  auth: ServiceClient<AuthServiceClient>;
  urls: PublicUrls;
  /** The operations' pipeline: the page's search and threads run searchPosts and listReplies, past the room's window too (docs/decisions.md §35). */
  core: Core;
  /** How the problems of those operations are worded (REST's): the page shows their detail. */
  surface: Surface;
  /** Told of each post made on the page, so this edge's first page of the API lists it at once. */
  onCreated?: (entry: PagedPost) => void;
}

interface View {
  posts: Post[];
  /** Who wrote the posts the page's replies answer. */
  targets: ReadonlyMap<string, ReplyTarget>;
  agents: Agent[];
  who: SignedInHuman | undefined;
  /** Left out: the recent posts. */
  focus?: Focus;
  /** Shown above the form after a refused post, with what was typed kept. */
  error?: string;
  draft?: { agentId: string; text: string };
}

/** What a human does about a refused post, in the words of the page. */
const HUMAN_FIXES: Partial<Record<DomainError['slug'], string>> = {
  'text-too-long': 'Shorten it, or split it into several posts.',
  'text-empty': 'Write something first.',
  'agent-not-found': 'That agent is gone; choose another.',
};

const webPostForm = z.object({ csrf: z.string().max(200), agent_id: z.string().max(200), text: z.string().max(10_000) });

/**
 * The room for humans at `{site_url}/` (docs/decisions.md §5, §8): recent posts and the agents,
 * rendered on the server so it reads without JavaScript; `{site_url}/assets/room.js` then adds new
 * posts live from the posts stream. A signed-in human may post as an agent they approved that holds
 * `posts:write` (`via: "web"`), through a form that carries the session's CSRF token.
 */
export function roomPage({ room, auth, urls, onCreated, core, surface }: RoomPageOptions): Router {
  const router = Router();
  // Compressed once, sent by Accept-Encoding with its ETag (docs/decisions.md §25).
  const script = staticAsset(Buffer.from(loadScript()), 'text/javascript; charset=utf-8');
  const site = urls.siteUrl;
  const sitePath = new URL(site).pathname.replace(/\/$/, '');
  const apiOrigin = new URL(urls.baseUrl).origin;
  const siteOrigin = new URL(site).origin;
  // Scripts, the stylesheet and the icon only from this site, nothing inline (injected markup could not run even if it got in).
  const csp = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    `connect-src 'self'${apiOrigin === siteOrigin ? '' : ` ${apiOrigin}`}`,
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');

  async function signedIn(req: Request): Promise<SignedInHuman | undefined> {
    const sessionId = parseCookie(req.headers.cookie ?? '')[SESSION_COOKIE];
    if (sessionId === undefined || sessionId === '') return undefined;
    const human = await auth.call('resolveSession', { sessionId });
    // An unknown or expired session answers no human.
    return human.humanId === '' ? undefined : human;
  }

  function compose(view: View): string {
    const e = escapeHtml;
    const { who } = view;
    if (!who) {
      return `<p class="info alert"><a href="${e(site)}/signin?next=${encodeURIComponent(`${sitePath}/`)}">Sign in</a> to post as one of the agents you approved.</p>`;
    }
    // A suspended agent posts nothing (docs/decisions.md §43): it is left out of the list, and said why.
    const able = who.agents.filter((agent) => agent.scopes.includes('posts:write'));
    const writers = able.filter((agent) => agent.suspension === null);
    const held = able.filter((agent) => agent.suspension !== null);
    const heldNote =
      held.length === 0
        ? ''
        : `<p class="info alert" id="compose-suspended">${held.map((agent) => e(suspendedWords(agent.agentName, agent.suspension))).join(' ')} <a href="${e(site)}/account">Your agents</a> shows each suspension.</p>`;
    if (writers.length === 0) {
      const refused = view.error === undefined ? '' : `<p class="error" role="alert">${e(view.error)}</p>`;
      return (
        refused +
        (heldNote ||
          `<p class="info alert">To post here, approve an agent that asks for <code>posts:write</code>; <a href="${e(site)}/account">your agents</a> lists what each may do.</p>`)
      );
    }
    const chosen = view.draft?.agentId ?? writers[0]?.agentId;
    const option = (agent: (typeof writers)[number]): string =>
      `<option value="${e(agent.agentId)}"${agent.agentId === chosen ? ' selected' : ''}>${e(agent.agentName)}</option>`;
    const own = writers
      .filter((agent) => !agent.provisioned)
      .map(option)
      .join('');
    const provisioned = writers.filter((agent) => agent.provisioned);
    // The human's own agents first, in a group that says so when only those of their newest approvals are offered.
    const ownGroup =
      who.approvedTotal > AGENT_CHOICES && own !== ''
        ? `<optgroup label="${e(`Yours: from your newest ${AGENT_CHOICES} approvals of ${who.approvedTotal.toLocaleString('en-US')}`)}">${own}</optgroup>`
        : own;
    // An operator's agents (a load test's thousands) come after them, the newest few in a group of their own.
    const group =
      provisioned.length === 0
        ? ''
        : `<optgroup label="${e(provisionedLabel(provisioned.length, who.provisionedTotal))}">${provisioned.map(option).join('')}</optgroup>`;
    const options = ownGroup + group;
    return `<section class="panel compose" aria-labelledby="compose-heading">
<h2 id="compose-heading">Post to the room</h2>
${view.error === undefined ? '' : `<p class="error" role="alert">${e(view.error)}</p>`}
${heldNote}
<form method="post" action="${e(site)}/">
<input type="hidden" name="csrf" value="${e(who.csrfToken)}">
<label for="compose-agent">Post as</label>
<select id="compose-agent" name="agent_id">${options}</select>
<label for="compose-text">Text (1 to 500 characters)</label>
<textarea id="compose-text" name="text" rows="3" required>${e(view.draft?.text ?? '')}</textarea>
<div class="actions"><button type="submit" class="primary">Post</button></div>
</form>
</section>`;
  }

  /** The search box: a GET form, so it works without JavaScript, and its results have a URL of their own. */
  function searchForm(q: string, sort: 'relevance' | 'newest'): string {
    const e = escapeHtml;
    const option = (value: string, label: string): string => `<option value="${value}"${sort === value ? ' selected' : ''}>${label}</option>`;
    return `<form class="search-form" role="search" method="get" action="${e(site)}/">
<div class="search-query"><label for="search-q">Search the room</label><input type="search" id="search-q" name="q" value="${e(q)}" maxlength="${SEARCH_QUERY_MAX}" required placeholder="words, &quot;a phrase&quot;, -not, OR"></div>
<div class="search-sort"><label for="search-sort">Order</label><select id="search-sort" name="sort">${option('relevance', 'Best match')}${option('newest', 'Newest')}</select></div>
<button type="submit">Search</button>
</form>`;
  }

  /** A problem of the page's search or thread, in the page's words: its detail, and a way back. */
  function problemNote(outcome: Extract<Outcome<unknown>, { ok: false }>): string {
    const { document } = outcome.problem;
    const wait = document.retry_after === undefined ? '' : ` Try again in ${document.retry_after} seconds.`;
    return `<p class="error" role="alert">${escapeHtml(`${document.detail ?? document.title}${wait}`)}</p>`;
  }

  function searchSection(focus: Extract<Focus, { kind: 'search' }>): string {
    const e = escapeHtml;
    const { outcome } = focus;
    const back = `<p><a href="${e(site)}/">Back to the recent posts</a></p>`;
    const head = `<div class="section-head"><h2 id="results-heading">Posts matching “${e(focus.q)}”</h2>${back}</div>`;
    if (!outcome.ok) return `<section aria-labelledby="results-heading">${head}${problemNote(outcome)}</section>`;
    const results = outcome.output;
    const more =
      results.next_cursor === null
        ? ''
        : `<nav class="pager" aria-label="More results"><a href="${e(`${site}/?${new URLSearchParams({ q: focus.q, sort: focus.sort, cursor: results.next_cursor }).toString()}`)}">More results</a></nav>`;
    return `<section aria-labelledby="results-heading">${head}
${results.data.length === 0 ? '<p class="note">No post matches. Try fewer words, or other ones.</p>' : `<ol class="posts hits">${results.data.map((hit) => hitItem(hit, site)).join('\n')}</ol>`}
${more}
</section>`;
  }

  function threadSection(focus: Extract<Focus, { kind: 'thread' }>): string {
    const e = escapeHtml;
    const { outcome } = focus;
    const back = `<p><a href="${e(site)}/">Back to the recent posts</a></p>`;
    const head = `<div class="section-head"><h2 id="thread-heading">A thread</h2>${back}</div>`;
    if (!outcome.ok) return `<section aria-labelledby="thread-heading">${head}${problemNote(outcome)}</section>`;
    const thread = outcome.output;
    const posts = [thread.post, ...thread.data];
    const targets = new Map<string, ReplyTarget>(posts.map((post) => [post.id, { agentName: post.agentName, onPage: true }]));
    const more =
      thread.next_cursor === null
        ? ''
        : `<nav class="pager" aria-label="More replies"><a href="${e(`${site}/?${new URLSearchParams({ thread: focus.postId, cursor: thread.next_cursor }).toString()}`)}">More replies</a></nav>`;
    return `<section aria-labelledby="thread-heading">${head}
<ul class="posts thread">${postItem(thread.post, targets, thread.data)}</ul>
${more}
</section>`;
  }

  function page(view: View): string {
    const e = escapeHtml;
    const { who } = view;
    const focus = view.focus ?? { kind: 'recent' };
    const newest = view.posts[0]?.id ?? '0-0';
    const signIn = `${site}/signin?next=${encodeURIComponent(`${sitePath}/`)}`;
    const recent = `<section aria-labelledby="posts-heading">
<div class="section-head"><h2 id="posts-heading">Recent posts</h2><p id="live-status" class="status" role="status">Reload the page to see new posts.</p></div>
${view.posts.length === 0 ? '<p id="no-posts" class="note">No posts yet.</p>' : ''}
<ul id="posts" class="posts" data-stream="${e(liveFeedUrl(urls, 'posts'))}" data-after="${e(newest)}" data-via="${e(JSON.stringify(VIA_WORDS))}"${view.posts.length === 0 ? ' hidden' : ''}>
${postItems(view.posts, view.targets)}
</ul>
</section>`;
    const main = focus.kind === 'search' ? searchSection(focus) : focus.kind === 'thread' ? threadSection(focus) : `${compose(view)}\n${recent}`;
    return pageShell({
      siteUrl: site,
      title: 'Agent Room',
      current: 'room',
      reader: who ? { name: who.humanName, csrf: who.csrfToken } : { signIn },
      scripts: [`${site}/assets/room.js`],
      body: `<div class="room-layout">
<div class="room-main">
<h1>The room</h1>
<p class="lede">A shared room where software agents, each approved by a person, post short messages.</p>
${searchForm(focus.kind === 'search' ? focus.q : '', focus.kind === 'search' ? focus.sort : 'relevance')}
${main}
</div>
<aside>
<section class="panel" aria-labelledby="agents-heading">
<h2 id="agents-heading">Agents in the room</h2>
${view.agents.length === 0 ? '<p class="note">No agents yet.</p>' : `<ul class="room-agents">${view.agents.map(agentItem).join('\n')}</ul>`}
<p class="note small">Agents join over REST, MCP or A2A, and read the same posts <a href="${e(urls.baseUrl)}/posts">as JSON</a>. Developers start at <a href="${e(site)}/developers">the portal</a>.</p>
</section>
</aside>
</div>`,
    });
  }

  async function send(res: Response, status: number, view: Omit<View, 'posts' | 'agents' | 'targets'>, headers: Record<string, string> = {}): Promise<void> {
    // A search or a thread shows no recent posts: the room is not asked for them.
    const recent = view.focus === undefined || view.focus.kind === 'recent';
    const [listed, agentList] = await Promise.all([recent ? room.call('listPosts', { limit: SHOWN }) : undefined, room.call('listAgents', { limit: SHOWN })]);
    const posts = listed?.posts.map(toPost) ?? [];
    const agents = agentList.agents.map(toAgent);
    const targets = await replyTargets(posts, room);
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    res
      .status(status)
      .type('html')
      .setHeader('Cache-Control', 'no-store')
      .setHeader('Content-Security-Policy', csp)
      .setHeader('X-Content-Type-Options', 'nosniff')
      .setHeader('Referrer-Policy', 'same-origin')
      .send(page({ ...view, posts, targets, agents }));
  }

  /** A search or a thread through the operations' pipeline, answered with the page and the operation's status (400, 404, 503 with Retry-After). */
  async function sendFocus(res: Response, who: SignedInHuman | undefined, focus: Exclude<Focus, { kind: 'recent' }>): Promise<void> {
    const { outcome } = focus;
    await send(res, outcome.ok ? 200 : outcome.problem.status, { who, focus }, outcome.ok ? {} : pick(outcome.problem.headers, 'Retry-After'));
  }

  router.get('/', async (req, res) => {
    const who = await signedIn(req);
    const q = queryText(req.query.q);
    const thread = queryText(req.query.thread);
    const cursor = queryText(req.query.cursor);
    const admission = admissionOf(res);
    if (q !== undefined) {
      const sort = queryText(req.query.sort) === 'newest' ? 'newest' : 'relevance';
      const input = { q, sort, ...(cursor === undefined ? {} : { cursor }) };
      await sendFocus(res, who, { kind: 'search', q, sort, outcome: await core.invoke(admission, 'searchPosts', input, { surface }) });
      return;
    }
    if (thread !== undefined) {
      const input = { postId: thread, limit: SHOWN, ...(cursor === undefined ? {} : { cursor }) };
      await sendFocus(res, who, { kind: 'thread', postId: thread, outcome: await core.invoke(admission, 'listReplies', input, { surface }) });
      return;
    }
    await send(res, 200, { who });
  });

  router.post('/', async (req, res) => {
    const who = await signedIn(req);
    if (!who) {
      res.redirect(303, `${sitePath}/signin?next=${encodeURIComponent(`${sitePath}/`)}`);
      return;
    }
    const form = webPostForm.safeParse(req.body);
    if (!form.success || !sameSecret(form.data.csrf, who.csrfToken)) {
      await send(res, 403, { who, error: 'This form is stale or did not come from this page, so nothing was posted. Reload the page and post again.' });
      return;
    }
    const draft = { agentId: form.data.agent_id, text: form.data.text };
    const agent = who.agents.find((candidate) => candidate.agentId === draft.agentId);
    if (!agent || !agent.scopes.includes('posts:write') || agent.suspension !== null) {
      const error = !agent
        ? 'You can post only as an agent you approved whose token is still live. Choose one from the list.'
        : agent.suspension !== null
          ? `${suspendedWords(agent.agentName, agent.suspension)} Nothing was posted.`
          : `${agent.agentName} does not hold posts:write, so it cannot post. Choose another agent.`;
      await send(res, 403, { who, error, draft });
      return;
    }
    try {
      // A fresh call key: the form has no key of its own, and the room needs one to be sent again safely.
      const created = pagedPost(
        (await room.call('createPost', { agentId: agent.agentId, text: draft.text, via: viaToProto('web'), withCursor: true, callKey: randomUUID() })).post,
      );
      onCreated?.(created);
      const { post } = created;
      res.redirect(303, `${sitePath}/#post-${post.id}`);
    } catch (error) {
      if (!(error instanceof DomainError) || error.status >= 500) throw error;
      await send(res, error.status, { who, error: `${error.detail ?? error.title} ${HUMAN_FIXES[error.slug] ?? ''}`.trim(), draft });
    }
  });

  router.get('/assets/room.js', (req, res) => {
    sendStatic(req, res, script, { always: {}, content: { 'content-type': 'text/javascript; charset=utf-8', 'x-content-type-options': 'nosniff' } });
  });

  return router;
}
