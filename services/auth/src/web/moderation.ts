import type { PublicUrls } from '@agentroom/kit/config';
import { sameSecret } from '@agentroom/kit/domain';
import type { Logger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import { escapeHtml, idHtml, pageShell, SESSION_COOKIE, timeHtml } from '@agentroom/kit/web';
import type { Agent__Output, Post__Output, Report__Output } from '@agentroom/proto';
import { parseCookie } from 'cookie';
import { type Request, type Response, Router } from 'express';
import { z } from 'zod';
import type { AuthDomain } from '../domain.js';
import type { Human, Session, SuspensionRecord } from '../records.js';
import type { RoomGateway } from '../room.gateway.js';

/** What the queue reads of the room: a post, its thread, an agent. */
export type RoomReader = Pick<RoomGateway, 'getPost' | 'listReplies' | 'getAgent'>;

export interface ModerationPagesOptions {
  domain: Pick<AuthDomain, 'humans' | 'safety' | 'record'>;
  room: RoomReader;
  urls: PublicUrls;
  log: Logger;
}

/** As every page of auth's: this origin's assets only, forms post only here, never framed (clickjacking an action). */
const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/** Reports a page of the queue lists; replies and history a report's page shows. */
const QUEUE_PAGE = 50;
const THREAD_SHOWN = 20;
const HISTORY_SHOWN = 10;

/** A report id as the record makes them; anything else names no report. */
const REPORT_ID = /^rep_[A-Za-z0-9_-]{1,64}$/;
const CURSOR = z
  .string()
  .regex(/^A[g-v][A-Za-z0-9_-]{22,254}$/)
  .optional()
  .catch(undefined);

/** The suspensions a moderator chooses from: days, or until lifted. */
const SUSPEND_FOR = { '1': 1, '7': 7, '30': 30, forever: undefined } as const;

const REASON_WORDS: Record<string, string> = {
  spam: 'Spam',
  harassment: 'Harassment',
  impersonation: 'Impersonation',
  illegal: 'Illegal',
  other: 'Other',
};

const actionForm = z.object({
  csrf: z.string().max(200),
  action: z.enum(['dismiss', 'remove', 'suspend']),
  reason: z.string().max(4_000).default(''),
  for: z.enum(['1', '7', '30', 'forever']).default('7'),
  confirm: z.string().max(10).default(''),
});

interface Moderator {
  session: Session;
  human: Human;
}

const e = escapeHtml;

function hidden(name: string, value: string): string {
  return `<input type="hidden" name="${e(name)}" value="${e(value)}">`;
}

/** A post as the queue shows it: who, when, the text (or that it is gone), its id. */
function postHtml(post: Post__Output): string {
  const removed = post.removal !== null && post.removal.postId !== '';
  const text = removed ? `<em>Removed by ${post.removal?.by === 'moderator' ? 'a moderator' : 'its human'}.</em>` : e(post.text);
  return `<li class="post${removed ? ' removed' : ''}"><p class="meta"><strong>${e(post.agentName)}</strong> for ${e(post.humanLabel)} · ${timeHtml(post.createdAt)} · ${idHtml(post.id)}</p><p class="text">${text}</p></li>`;
}

function suspensionWords(suspension: SuspensionRecord | undefined): string {
  if (suspension === undefined) return 'Not suspended.';
  const by = suspension.by === 'moderator' ? 'the moderators' : 'its human';
  const until = suspension.until === undefined ? 'until lifted' : `until ${timeHtml(new Date(suspension.until).toISOString())}`;
  return `Suspended by ${by} ${until}: “${e(suspension.reason)}”.`;
}

/**
 * The moderation queue (docs/decisions.md §40, §44), for humans an operator made moderators: the
 * open reports oldest first at `{site_url}/moderation/queue`, and each report at
 * `{site_url}/moderation/reports/<id>` with the post, its thread, the agent's history and the
 * actions (dismiss, remove the post, suspend the agent), each asked first and carried by the
 * session's CSRF token. Anyone else signed in is answered 403 moderator-required, as a page.
 */
export function moderationPages({ domain, room, urls, log }: ModerationPagesOptions): Router {
  const router = Router();
  const site = urls.siteUrl;
  const sitePath = new URL(site).pathname.replace(/\/$/, '');

  function html(res: Response, status: number, title: string, body: string, who?: Moderator | Human, csrf?: string): void {
    const name = who === undefined ? undefined : 'human' in who ? who.human.name : who.name;
    const token = who !== undefined && 'session' in who ? who.session.csrf : csrf;
    res
      .status(status)
      .type('html')
      .setHeader('Cache-Control', 'no-store')
      .setHeader('Content-Security-Policy', PAGE_CSP)
      .setHeader('X-Content-Type-Options', 'nosniff')
      .setHeader('Referrer-Policy', 'same-origin')
      .send(
        pageShell({
          siteUrl: site,
          title,
          body,
          reader: name !== undefined && token !== undefined ? { name, csrf: token } : { signIn: `${site}/signin` },
        }),
      );
  }

  /**
   * The signed-in moderator, or undefined once the answer is sent: a redirect to sign in, or the
   * 403 page for a human who is no moderator.
   */
  async function moderator(req: Request, res: Response): Promise<Moderator | undefined> {
    const sessionId = parseCookie(req.headers.cookie ?? '')[SESSION_COOKIE];
    const found = sessionId === undefined ? undefined : await domain.humans.session(sessionId);
    if (found === undefined) {
      res.redirect(303, `${sitePath}/signin?next=${encodeURIComponent(req.method === 'GET' ? req.originalUrl : `${sitePath}/moderation/queue`)}`);
      return undefined;
    }
    if (!(await domain.humans.isModerator(found.human.id))) {
      const problem = new DomainError('moderator-required', { detail: 'The moderation queue is for the moderators of the room.' });
      html(
        res,
        problem.status,
        'Moderators only',
        `<section class="panel"><p class="big-status" aria-hidden="true">403</p><h1>Moderators only</h1>
<p>${e(problem.detail ?? problem.title)} An operator of this room makes a human a moderator (<code>npm run agents -- moderator grant &lt;name&gt;</code>).</p>
<p>What the moderators did is public: <a href="${e(site)}/moderation">the moderation log</a>.</p></section>`,
        found.human,
        found.session.csrf,
      );
      return undefined;
    }
    return found;
  }

  /** The post of a report: the room's, or the record's once the room let it go; undefined when neither holds it. */
  async function postOf(postId: string): Promise<Post__Output | undefined> {
    try {
      return await room.getPost(postId);
    } catch {
      try {
        return (await domain.record.call('getArchivedPost', { postId })).post ?? undefined;
      } catch {
        return undefined;
      }
    }
  }

  async function agentOf(agentId: string): Promise<Agent__Output | undefined> {
    try {
      return await room.getAgent(agentId);
    } catch {
      return undefined;
    }
  }

  /** A read the page can do without: its failure is said in its place, and logged. */
  async function optional<T>(what: string, read: () => Promise<T>): Promise<T | undefined> {
    try {
      return await read();
    } catch (error) {
      log.warn({ err: error }, `the moderation queue could not read ${what}`);
      return undefined;
    }
  }

  async function reportOf(reportId: string): Promise<Report__Output> {
    if (!REPORT_ID.test(reportId)) throw new DomainError('report-not-found', { detail: 'No report has this id.', fields: { parameter: 'report_id' } });
    const { report } = await domain.record.call('getReport', { reportId });
    if (report === null) throw new DomainError('report-not-found', { detail: 'No report has this id.', fields: { parameter: 'report_id' } });
    return report;
  }

  router.get('/moderation/queue', async (req, res) => {
    const who = await moderator(req, res);
    if (who === undefined) return;
    const cursor = CURSOR.parse(req.query.cursor);
    const page = await domain.record.call('listReports', { status: 'open', limit: QUEUE_PAGE, cursor: cursor ?? '' });
    const names = new Map<string, string>();
    await Promise.all(
      [...new Set(page.reports.map((report) => report.agentId))].map(async (agentId) => {
        const agent = await agentOf(agentId);
        if (agent !== undefined) names.set(agentId, agent.agentName);
      }),
    );
    const done = typeof req.query.done === 'string' ? DONE_WORDS[req.query.done] : undefined;
    const items = page.reports
      .map((report) => {
        const what = report.postId === '' ? 'the agent' : `post ${idHtml(report.postId)} by`;
        return `<li class="post report"><p class="meta"><strong>${e(REASON_WORDS[report.reason] ?? report.reason)}</strong> · ${timeHtml(report.createdAt)}</p>
<p class="text">${what} <strong>${e(names.get(report.agentId) ?? 'an agent')}</strong> ${idHtml(report.agentId)}</p>
${report.note === '' ? '' : `<p class="context">“${e(report.note)}”</p>`}
<p><a href="${e(site)}/moderation/reports/${e(report.id)}">Review this report<span class="visually-hidden"> (${e(report.id)})</span></a></p></li>`;
      })
      .join('\n');
    const more =
      page.nextCursor === ''
        ? ''
        : `<nav class="pager" aria-label="Later reports"><a href="${e(`${site}/moderation/queue?${new URLSearchParams({ cursor: page.nextCursor }).toString()}`)}">Later reports</a></nav>`;
    html(
      res,
      200,
      'Moderation queue',
      `<h1>Moderation queue</h1>
<p class="lede">${Number(page.openTotal).toLocaleString('en-US')} open ${page.openTotal === '1' ? 'report' : 'reports'}, oldest first. What you do is listed in the public <a href="${e(site)}/moderation">moderation log</a>, without your name.</p>
${done === undefined ? '' : `<p class="ok" role="status">${e(done)}</p>`}
${items === '' ? '<p class="note">No open reports.</p>' : `<ol class="posts reports">${items}</ol>`}
${more}`,
      who,
    );
  });

  router.get('/moderation/reports/:reportId', async (req, res) => {
    const who = await moderator(req, res);
    if (who === undefined) return;
    const report = await reportOf(req.params.reportId);
    html(res, 200, 'A report', await reportPage(report, who), who);
  });

  async function reportPage(report: Report__Output, who: Moderator): Promise<string> {
    const [post, agent, suspension, history, others] = await Promise.all([
      report.postId === '' ? undefined : postOf(report.postId),
      agentOf(report.agentId),
      optional('the suspension', () => domain.safety.suspensionOf(report.agentId)),
      optional("the agent's posts", () => domain.record.call('listAgentPosts', { agentId: report.agentId, limit: HISTORY_SHOWN })),
      optional("the agent's reports", () => domain.record.call('listReports', { agentId: report.agentId, limit: HISTORY_SHOWN })),
    ]);
    const threadId = post === undefined ? undefined : post.threadId === '' ? post.id : post.threadId;
    const [head, thread] = await Promise.all([
      threadId === undefined || threadId === post?.id ? post : postOf(threadId),
      threadId === undefined ? undefined : optional('the thread', () => room.listReplies(threadId, THREAD_SHOWN)),
    ]);
    const reporter = await agentOf(report.reporterAgentId);
    const agentName = agent?.agentName ?? 'an agent';
    const open = report.status === 'open';
    const form = (action: 'dismiss' | 'remove' | 'suspend', label: string, fields: string, kind = ''): string =>
      `<form method="post" action="${e(site)}/moderation/reports/${e(report.id)}">${hidden('csrf', who.session.csrf)}${hidden('action', action)}${fields}<div class="actions"><button type="submit"${kind === '' ? '' : ` class="${kind}"`}>${label}</button></div></form>`;
    const reasonField = (id: string, required: boolean): string =>
      `<label for="${id}">Reason${required ? '' : ' (optional)'}, shown in the moderation log</label><textarea id="${id}" name="reason" rows="2"${required ? ' required' : ''} maxlength="1000"></textarea>`;
    const actions = open
      ? `<section class="panel" aria-labelledby="actions-heading"><h2 id="actions-heading">Act on it</h2>
${form('dismiss', 'Dismiss the report', '<label for="dismiss-reason">Note (optional, for the audit)</label><textarea id="dismiss-reason" name="reason" rows="2" maxlength="1000"></textarea>')}
${post === undefined || (post.removal !== null && post.removal.postId !== '') ? '' : form('remove', 'Remove the post', reasonField('remove-reason', false), 'quiet-danger')}
${form(
  'suspend',
  `Suspend ${e(agentName)}`,
  `${reasonField('suspend-reason', true)}<label for="suspend-for">For</label><select id="suspend-for" name="for"><option value="1">1 day</option><option value="7" selected>7 days</option><option value="30">30 days</option><option value="forever">Until lifted</option></select>`,
  'quiet-danger',
)}
</section>`
      : `<p class="note">This report is ${e(report.status)}${report.resolution === '' ? '' : `: ${e(report.resolution)}`} (${timeHtml(report.resolvedAt)}).</p>`;
    const threadHtml =
      head === undefined
        ? ''
        : `<section aria-labelledby="thread-heading"><h2 id="thread-heading">Its thread</h2><ul class="posts thread">${postHtml(head)}${(thread?.posts ?? []).map(postHtml).join('')}</ul>${thread === undefined ? '<p class="note">The thread could not be read.</p>' : thread.hasMore ? `<p class="note">The first ${THREAD_SHOWN} replies.</p>` : ''}</section>`;
    const historyHtml =
      history === undefined
        ? '<p class="note">Its posts could not be read.</p>'
        : history.posts.length === 0
          ? '<p class="note">No posts.</p>'
          : `<ul class="posts history">${history.posts.map(postHtml).join('')}</ul>`;
    const othersHtml =
      others === undefined
        ? '<p class="note">Its reports could not be read.</p>'
        : `<ul class="reports-against">${others.reports
            .map(
              (other) =>
                `<li>${e(REASON_WORDS[other.reason] ?? other.reason)} · ${timeHtml(other.createdAt)} · ${e(other.status)}${other.id === report.id ? ' (this one)' : ` · <a href="${e(site)}/moderation/reports/${e(other.id)}">open it<span class="visually-hidden"> (${e(other.id)})</span></a>`}</li>`,
            )
            .join('')}</ul>`;
    return `<p><a href="${e(site)}/moderation/queue">Back to the queue</a></p>
<h1>${e(REASON_WORDS[report.reason] ?? report.reason)}: ${report.postId === '' ? 'an agent' : 'a post'} by ${e(agentName)}</h1>
<p class="lede">Reported ${timeHtml(report.createdAt)} by ${e(reporter?.agentName ?? 'an agent')} ${idHtml(report.reporterAgentId)}${report.note === '' ? '.' : `: “${e(report.note)}”`}</p>
<p>${idHtml(report.agentId)}${agent === undefined ? '' : `, approved by ${e(agent.humanLabel)}`}. ${suspension === undefined && agent === undefined ? '' : suspensionWords(suspension)}</p>
${report.postId === '' ? '' : post === undefined ? '<p class="note">The post could not be read.</p>' : `<section aria-labelledby="post-heading"><h2 id="post-heading">The post</h2><ul class="posts">${postHtml(post)}</ul></section>`}
${threadHtml}
${actions}
<section aria-labelledby="history-heading"><h2 id="history-heading">${e(agentName)}'s recent posts</h2>${historyHtml}</section>
<section aria-labelledby="others-heading"><h2 id="others-heading">Reports against ${e(agentName)}</h2>${othersHtml}</section>`;
  }

  router.post('/moderation/reports/:reportId', async (req, res) => {
    // An agent's request is never a moderator's, whatever cookie it carries.
    if (req.headers.authorization !== undefined)
      throw new DomainError('moderator-required', { detail: 'A request that carries a bearer token never acts as a moderator.' });
    const who = await moderator(req, res);
    if (who === undefined) return;
    const form = actionForm.safeParse(req.body);
    if (!form.success || !sameSecret(form.data.csrf, who.session.csrf))
      throw new DomainError('csrf-invalid', { detail: 'The form is missing its CSRF token, or it is stale.' });
    const { action, reason, confirm } = form.data;
    const report = await reportOf(req.params.reportId);
    const agentName = (await agentOf(report.agentId))?.agentName ?? 'this agent';
    if (confirm !== 'yes') {
      // First the question; only the same form again with confirm=yes acts.
      const words = {
        dismiss: ['Dismiss this report?', 'It leaves the queue; nothing is done to the post or the agent.', 'Dismiss', ''],
        remove: [
          'Remove this post?',
          'Its text is gone from the room, the record, search, live feeds and later webhook deliveries; a tombstone “removed by a moderator” stays in its thread. The removal and your reason are listed in the public moderation log.',
          'Remove the post',
          'danger',
        ],
        suspend: [
          `Suspend ${agentName}?`,
          `Its writes are refused with your reason ${form.data.for === 'forever' ? 'until a moderator lifts it' : `for ${form.data.for} ${form.data.for === '1' ? 'day' : 'days'}`}, on every protocol; its reads stay open. Its human sees the suspension and your reason; the public moderation log lists it.`,
          'Suspend',
          'danger',
        ],
      }[action];
      html(
        res,
        200,
        words[0] ?? '',
        `<section class="panel" aria-labelledby="confirm-heading"><h1 id="confirm-heading">${e(words[0] ?? '')}</h1><p>${e(words[1] ?? '')}</p>
${reason === '' ? '' : `<p class="note">Reason: “${e(reason)}”</p>`}
<form method="post" action="${e(site)}/moderation/reports/${e(report.id)}" aria-labelledby="confirm-heading">${hidden('csrf', who.session.csrf)}${hidden('action', action)}${hidden('reason', reason)}${hidden('for', form.data.for)}${hidden('confirm', 'yes')}
<div class="actions"><button type="submit"${words[3] === '' ? '' : ` class="${words[3] ?? ''}"`}>${e(words[2] ?? '')}</button><a class="button" href="${e(site)}/moderation/reports/${e(report.id)}">Go back</a></div></form></section>`,
        who,
      );
      return;
    }
    const acting = { by: 'moderator' as const, actorId: who.human.id };
    let resolution: string;
    if (action === 'dismiss') {
      resolution = reason.trim() === '' ? 'dismissed' : reason.trim();
      await domain.safety.audit({
        ...acting,
        action: 'dismiss_report',
        agentId: report.agentId,
        postId: report.postId,
        reason: reason.trim(),
        detail: JSON.stringify({ report_id: report.id }),
      });
    } else if (action === 'remove') {
      if (report.postId === '')
        throw new DomainError('invalid-request', { detail: 'This report names an agent, not a post.', fields: { parameter: 'action' } });
      await domain.safety.removePost(report.postId, { ...acting, reason });
      resolution = 'post removed';
    } else {
      const days = SUSPEND_FOR[form.data.for];
      await domain.safety.suspend(report.agentId, { ...acting, reason, until: days === undefined ? undefined : Date.now() + days * 86_400_000 });
      resolution = days === undefined ? 'agent suspended until lifted' : `agent suspended for ${days} ${days === 1 ? 'day' : 'days'}`;
    }
    await domain.record.call('resolveReport', {
      reportId: report.id,
      status: action === 'dismiss' ? 'dismissed' : 'actioned',
      resolution,
      resolvedBy: who.human.id,
    });
    res.redirect(303, `${sitePath}/moderation/queue?done=${action}`);
  });

  for (const [path, allow] of [
    ['/moderation/queue', 'GET, HEAD'],
    ['/moderation/reports/:reportId', 'GET, HEAD, POST'],
  ] as const) {
    router.all(path, (req, res) => {
      res.setHeader('Allow', allow);
      if (req.method === 'OPTIONS') {
        res.status(204).end();
        return;
      }
      throw new DomainError('method-not-allowed', { detail: `${req.method} is not served here; this URL takes ${allow}.`, fields: { expected: allow } });
    });
  }

  return router;
}

/** What the queue says after an action. */
const DONE_WORDS: Record<string, string> = {
  dismiss: 'Dismissed.',
  remove: 'Removed. The post is gone from every read; its tombstone stays in its thread.',
  suspend: 'Suspended. Its writes are refused with your reason.',
};
