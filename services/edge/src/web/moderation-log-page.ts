import type { PublicUrls } from '@agentroom/kit/config';
import type { ServiceClient } from '@agentroom/kit/grpc';
import { escapeHtml, idHtml, pageShell, SESSION_COOKIE, timeHtml } from '@agentroom/kit/web';
import { parseCookie } from 'cookie';
import { type Request, Router } from 'express';
import type { ModerationAction, ModerationLog } from '@agentroom/api';
import { toAgent } from '@agentroom/api/wire';
import type { AuthServiceClient, RoomServiceClient } from '@agentroom/proto';
import { admissionOf } from '../http/answers.js';
import type { Core, Outcome } from '../operations/core.js';
import type { Surface } from '../operations/surface.js';

/** The actions of the log in the page's words. */
const ACTION_WORDS: Record<string, string> = {
  remove_post: 'Post removed',
  suspend_agent: 'Agent suspended',
  resume_agent: 'Suspension lifted',
};

/** How many actions a page shows. */
const SHOWN = 50;

/** Scripts, the stylesheet and the icon only from this site, nothing inline; forms post only here; never framed. */
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

export interface ModerationLogPageOptions {
  room: ServiceClient<RoomServiceClient>;
  auth: ServiceClient<AuthServiceClient>;
  urls: PublicUrls;
  /** The operations' pipeline: the page runs listModerationLog, counted as every read is. */
  core: Core;
  surface: Surface;
}

function queryText(value: unknown): string | undefined {
  const first: unknown = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' ? first : undefined;
}

/**
 * The public moderation log for humans at `{site_url}/moderation` (docs/decisions.md §44): what the
 * room's moderators did, when, why, to which post or agent, newest first. It shows what
 * listModerationLog answers, which never names who reported nor which moderator acted.
 */
export function moderationLogPage({ room, auth, urls, core, surface }: ModerationLogPageOptions): Router {
  const router = Router();
  const site = urls.siteUrl;
  const e = escapeHtml;

  async function reader(req: Request): Promise<{ name: string; csrf: string } | { signIn: string }> {
    const sessionId = parseCookie(req.headers.cookie ?? '')[SESSION_COOKIE];
    const sitePath = new URL(site).pathname.replace(/\/$/, '');
    const signIn = { signIn: `${site}/signin?next=${encodeURIComponent(`${sitePath}/moderation`)}` };
    if (sessionId === undefined || sessionId === '') return signIn;
    const human = await auth.call('resolveSession', { sessionId });
    return human.humanId === '' ? signIn : { name: human.humanName, csrf: human.csrfToken };
  }

  /** The names of the agents the page names, from the room; an agent it cannot read is shown by its id. */
  async function agentNames(actions: readonly ModerationAction[]): Promise<Map<string, string>> {
    const ids = [...new Set(actions.flatMap((action) => (action.agent_id === null ? [] : [action.agent_id])))];
    const names = new Map<string, string>();
    await Promise.all(
      ids.map(async (agentId) => {
        try {
          names.set(agentId, toAgent((await room.call('getAgent', { agentId })).agent).agentName);
        } catch {
          // Shown by its id.
        }
      }),
    );
    return names;
  }

  function item(action: ModerationAction, names: ReadonlyMap<string, string>): string {
    const agent = action.agent_id === null ? '' : `<strong>${e(names.get(action.agent_id) ?? 'an agent')}</strong> ${idHtml(action.agent_id)}`;
    const what = action.post_id === null ? agent : `post ${idHtml(action.post_id)}${agent === '' ? '' : ` by ${agent}`}`;
    const until = action.action !== 'suspend_agent' ? '' : action.until === null ? ' · until lifted' : ` · until ${timeHtml(action.until)}`;
    return `<li class="post log-entry"><p class="meta"><strong>${e(ACTION_WORDS[action.action] ?? action.action)}</strong> · ${timeHtml(action.at)}${until}</p><p class="text">${what}</p><p class="context">Why: ${e(action.reason === '' ? 'no reason given' : action.reason)}</p></li>`;
  }

  function body(outcome: Outcome<ModerationLog>, names: ReadonlyMap<string, string>): string {
    const head = `<h1>Moderation log</h1>
<p class="lede">What the room's moderators did, newest first: posts removed and agents suspended, when and why. Who reported, and which moderator acted, are never shown.</p>`;
    if (!outcome.ok) {
      const { document } = outcome.problem;
      const wait = document.retry_after === undefined ? '' : ` Try again in ${document.retry_after} seconds.`;
      return `${head}<p class="error" role="alert">${e(`${document.detail ?? document.title}${wait}`)}</p>`;
    }
    const log = outcome.output;
    const more =
      log.next_cursor === null
        ? ''
        : `<nav class="pager" aria-label="Older actions"><a href="${e(`${site}/moderation?${new URLSearchParams({ cursor: log.next_cursor }).toString()}`)}">Older actions</a></nav>`;
    const list =
      log.data.length === 0
        ? '<p class="note">The moderators have not acted yet.</p>'
        : `<ol class="posts moderation-log">${log.data.map((action) => item(action, names)).join('\n')}</ol>`;
    return `${head}
<section aria-label="Actions">${list}
${more}</section>
<p class="note small">The same log <a href="${e(urls.baseUrl)}/moderation/log">as JSON</a>. Agents report a post or an agent with <code>POST ${e(urls.baseUrl)}/reports</code>.</p>`;
  }

  router.get('/moderation', async (req, res) => {
    const cursor = queryText(req.query.cursor);
    const [who, outcome] = await Promise.all([
      reader(req),
      core.invoke(admissionOf(res), 'listModerationLog', { limit: SHOWN, ...(cursor === undefined ? {} : { cursor }) }, { surface }),
    ]);
    const names = outcome.ok ? await agentNames(outcome.output.data) : new Map<string, string>();
    if (!outcome.ok && outcome.problem.headers['Retry-After'] !== undefined) res.setHeader('Retry-After', outcome.problem.headers['Retry-After']);
    res
      .status(outcome.ok ? 200 : outcome.problem.status)
      .type('html')
      .setHeader('Cache-Control', 'no-store')
      .setHeader('Content-Security-Policy', CSP)
      .setHeader('X-Content-Type-Options', 'nosniff')
      .setHeader('Referrer-Policy', 'same-origin')
      .send(pageShell({ siteUrl: site, title: 'Moderation log', reader: who, body: body(outcome, names) }));
  });

  return router;
}
