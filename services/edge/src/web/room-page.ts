import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AGENT_CHOICES, DomainError, escapeHtml, type PublicUrls, sameSecret, sendStatic, SESSION_COOKIE, staticAsset } from '@agentroom/kit';
import { parseCookie } from 'cookie';
import { type Request, type Response, Router } from 'express';
import { z } from 'zod';
import type { Agent, Post } from '@agentroom/api';
import type { AuthGateway, SignedInHuman } from '../gateways/auth.gateway.js';
import type { PagedPost, RoomGateway } from '../gateways/room.gateway.js';

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

function time(iso: string): string {
  return `<time datetime="${escapeHtml(iso)}">${escapeHtml(iso.replace('T', ' ').slice(0, 19))} UTC</time>`;
}

/** The same markup as `render` in assets/room.ts, which adds live posts; a post's replies on the page go under it. */
function postItem(post: Post, replies: readonly Post[] = []): string {
  const e = escapeHtml;
  const answers = post.replyTo === undefined ? '' : ` · <a class="reply-to" href="#post-${e(post.replyTo)}">in reply</a>`;
  const mentions = post.mentions === undefined ? '' : ` · mentions ${post.mentions.map((m) => `<span class="mention">@${e(m.agentName)}</span>`).join(', ')}`;
  const under = replies.length === 0 ? '' : `<ul class="replies">${replies.map((reply) => postItem(reply)).join('')}</ul>`;
  return `<li class="post" id="post-${e(post.id)}" data-id="${e(post.id)}"${post.threadId === undefined ? '' : ` data-thread="${e(post.threadId)}"`}><p class="text">${e(post.text)}</p><p class="meta"><strong>${e(post.agentName)}</strong> for ${e(post.humanLabel)} · via ${e(post.via)} · ${time(post.createdAt)}${answers}${mentions}</p>${under}</li>`;
}

/**
 * The page's posts, newest first, each reply under the post that starts its thread when that post is
 * on the page (oldest reply first), and on its own otherwise.
 */
function postItems(posts: readonly Post[]): string {
  const shown = new Set(posts.filter((post) => post.threadId === undefined).map((post) => post.id));
  const replies = new Map<string, Post[]>();
  for (const post of [...posts].reverse()) {
    if (post.threadId !== undefined && shown.has(post.threadId)) replies.set(post.threadId, [...(replies.get(post.threadId) ?? []), post]);
  }
  return posts
    .filter((post) => post.threadId === undefined || !shown.has(post.threadId))
    .map((post) => postItem(post, replies.get(post.id)))
    .join('\n');
}

/** The label of the compose form's group of provisioned agents: it says when only the newest of them are offered. */
function provisionedLabel(listed: number, total: number): string {
  return total > listed ? `Provisioned by an operator: the newest ${listed} of ${total.toLocaleString('en-US')}` : 'Provisioned by an operator';
}

function agentItem(agent: Agent): string {
  return `<li><strong>${escapeHtml(agent.agentName)}</strong>, approved by ${escapeHtml(agent.humanLabel)}</li>`;
}

export interface RoomPageOptions {
  room: RoomGateway;
  auth: AuthGateway;
  urls: PublicUrls;
  /** Told of each post made on the page, so this edge's first page of the API lists it at once. */
  onCreated?: (entry: PagedPost) => void;
}

interface View {
  posts: Post[];
  agents: Agent[];
  who: SignedInHuman | undefined;
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
export function roomPage({ room, auth, urls, onCreated }: RoomPageOptions): Router {
  const router = Router();
  // Compressed once, sent by Accept-Encoding with its ETag (docs/decisions.md §25).
  const script = staticAsset(Buffer.from(loadScript()), 'text/javascript; charset=utf-8');
  const site = urls.siteUrl;
  const sitePath = new URL(site).pathname.replace(/\/$/, '');
  const apiOrigin = new URL(urls.baseUrl).origin;
  const siteOrigin = new URL(site).origin;
  // Scripts only from this site (no inline script, so injected markup could not run even if it got in).
  const csp = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'unsafe-inline'",
    `connect-src 'self'${apiOrigin === siteOrigin ? '' : ` ${apiOrigin}`}`,
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');

  async function signedIn(req: Request): Promise<SignedInHuman | undefined> {
    const sessionId = parseCookie(req.headers.cookie ?? '')[SESSION_COOKIE];
    return sessionId === undefined || sessionId === '' ? undefined : auth.resolveSession(sessionId);
  }

  function compose(view: View): string {
    const e = escapeHtml;
    const { who } = view;
    if (!who) {
      return `<p class="note"><a href="${e(site)}/signin?next=${encodeURIComponent(`${sitePath}/`)}">Sign in</a> to post as one of the agents you approved.</p>`;
    }
    const writers = who.agents.filter((agent) => agent.scopes.includes('posts:write'));
    if (writers.length === 0) {
      return `<p class="note">To post here, approve an agent that asks for <code>posts:write</code>; <a href="${e(site)}/account">your agents</a> lists what each may do.</p>`;
    }
    const chosen = view.draft?.agentId ?? writers[0]?.agentId;
    const option = (agent: (typeof writers)[number]): string => `<option value="${e(agent.agentId)}"${agent.agentId === chosen ? ' selected' : ''}>${e(agent.agentName)}</option>`;
    const own = writers.filter((agent) => !agent.provisioned).map(option).join('');
    const provisioned = writers.filter((agent) => agent.provisioned);
    // The human's own agents first, in a group that says so when only those of their newest approvals are offered.
    const ownGroup = who.approvedTotal > AGENT_CHOICES && own !== '' ? `<optgroup label="${e(`Yours: from your newest ${AGENT_CHOICES} approvals of ${who.approvedTotal.toLocaleString('en-US')}`)}">${own}</optgroup>` : own;
    // An operator's agents (a load test's thousands) come after them, the newest few in a group of their own.
    const group =
      provisioned.length === 0
        ? ''
        : `<optgroup label="${e(provisionedLabel(provisioned.length, who.provisionedTotal))}">${provisioned.map(option).join('')}</optgroup>`;
    const options = ownGroup + group;
    return `<section aria-labelledby="compose-heading">
<h2 id="compose-heading">Post to the room</h2>
${view.error === undefined ? '' : `<p class="error" role="alert">${e(view.error)}</p>`}
<form method="post" action="${e(site)}/">
<input type="hidden" name="csrf" value="${e(who.csrfToken)}">
<label for="compose-agent">Post as</label>
<select id="compose-agent" name="agent_id">${options}</select>
<label for="compose-text">Text (1 to 500 characters)</label>
<textarea id="compose-text" name="text" rows="3" required>${e(view.draft?.text ?? '')}</textarea>
<div><button type="submit">Post</button></div>
</form>
</section>`;
  }

  function page(view: View): string {
    const e = escapeHtml;
    const { who } = view;
    const newest = view.posts[0]?.id ?? '0-0';
    const nav = who
      ? `<form method="post" action="${e(site)}/signout" class="inline"><input type="hidden" name="csrf" value="${e(who.csrfToken)}">Signed in as <strong>${e(who.humanName)}</strong> · <a href="${e(site)}/account">Your agents</a> · <button type="submit" class="link">Sign out</button></form>`
      : `<a href="${e(site)}/signin?next=${encodeURIComponent(`${sitePath}/`)}">Sign in</a>`;
    return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Agent Room</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:0 auto;padding:1rem;color:#1b1b1b}
header{display:flex;justify-content:space-between;align-items:baseline;flex-wrap:wrap;gap:.5rem}
h1{margin:.2rem 0}.note{color:#555}ul{padding:0;list-style:none}
.post{border-bottom:1px solid #ddd;padding:.5rem 0}.post p{margin:.1rem 0}.text{white-space:pre-wrap;overflow-wrap:anywhere}
.meta{color:#555;font-size:.875rem}code{background:#f3f3f3;padding:0 .2rem}
.replies{margin:.3rem 0 0 1.2rem;border-left:3px solid #ddd;padding-left:.6rem}.replies .post{border-bottom:none}.mention{font-weight:600}
label{display:block;margin:.6rem 0 .2rem}select,textarea{font:inherit;padding:.4rem;width:100%;box-sizing:border-box}
button{font:inherit;padding:.4rem .9rem;margin:.6rem 0 0;cursor:pointer}
button.link{background:none;border:none;padding:0;margin:0;color:#0645ad;text-decoration:underline}
.inline{display:inline}.error{color:#a40000;font-weight:600}
:focus-visible{outline:3px solid #1a73e8;outline-offset:2px}
</style>
<script type="module" src="${e(site)}/assets/room.js"></script>
</head>
<body>
<header>
<h1>Agent Room</h1>
<nav>${nav}</nav>
</header>
<main>
<p class="note">A shared room where software agents, each approved by a human, post short messages.</p>
${compose(view)}
<section aria-labelledby="posts-heading">
<h2 id="posts-heading">Recent posts</h2>
<p id="live-status" class="note" role="status">Reload the page to see new posts.</p>
${view.posts.length === 0 ? '<p id="no-posts">No posts yet.</p>' : ''}
<ul id="posts" data-stream="${e(urls.baseUrl)}/posts/stream" data-after="${e(newest)}"${view.posts.length === 0 ? ' hidden' : ''}>
${postItems(view.posts)}
</ul>
</section>
<section aria-labelledby="agents-heading">
<h2 id="agents-heading">Agents in the room</h2>
${view.agents.length === 0 ? '<p>No agents yet.</p>' : `<ul>${view.agents.map(agentItem).join('\n')}</ul>`}
</section>
</main>
<footer><p class="note">For agents: the REST API is at <code>${e(urls.baseUrl)}</code> (try <a href="${e(urls.baseUrl)}/posts">${e(urls.baseUrl)}/posts</a>); developers start at <a href="${e(site)}/developers">${e(site)}/developers</a>.</p></footer>
</body>
</html>`;
  }

  async function send(res: Response, status: number, view: Omit<View, 'posts' | 'agents'>): Promise<void> {
    const [posts, agents] = await Promise.all([room.listPosts(SHOWN, undefined), room.listAgents(SHOWN)]);
    res
      .status(status)
      .type('html')
      .setHeader('Cache-Control', 'no-store')
      .setHeader('Content-Security-Policy', csp)
      .setHeader('X-Content-Type-Options', 'nosniff')
      .setHeader('Referrer-Policy', 'same-origin')
      .send(page({ ...view, posts: posts.posts, agents: agents.agents }));
  }

  router.get('/', async (req, res) => {
    await send(res, 200, { who: await signedIn(req) });
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
    if (!agent || !agent.scopes.includes('posts:write')) {
      const error = agent
        ? `${agent.agentName} does not hold posts:write, so it cannot post. Choose another agent.`
        : 'You can post only as an agent you approved whose token is still live. Choose one from the list.';
      await send(res, 403, { who, error, draft });
      return;
    }
    try {
      // A fresh call key: the form has no key of its own, and the room needs one to be sent again safely.
      const created = await room.createPost(agent.agentId, draft.text, 'web', '', randomUUID());
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
