import { randomBytes } from 'node:crypto';
import type { PublicUrls } from '@agentroom/kit/config';
import { sameSecret } from '@agentroom/kit/domain';
import type { Logger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import { escapeHtml, SESSION_COOKIE } from '@agentroom/kit/web';
import { parseCookie, stringifySetCookie } from 'cookie';
import { type Request, type RequestHandler, type Response, Router } from 'express';
import { z } from 'zod';
import type { AttemptClient } from '../attempt-limiter.js';
import { type AuthorizeParams, AuthorizeRefusal } from '../authorization.js';
import type { AuthDomain } from '../domain.js';
import { ACTORS } from '@agentroom/kit/domain';
import { fromServiceError } from '@agentroom/kit/grpc';
import type { Connection, Human, Session, SuspensionRecord, TokenRecord } from '../records.js';
import type { Webhook } from '@agentroom/api';
import { listOfToken, type TokenList, type TokenPage, type TokenPosition } from '../store.js';
import {
  type AccountList,
  type AccountRow,
  accountPage,
  type ActivityMessage,
  type ActivityPost,
  type ActivityReport,
  type AgentCard,
  agentPage,
  agentQuestionPage,
  newTokenPage,
  type Read,
  SUSPEND_FOR,
  type SuspensionView,
  answeredPage,
  authorizeErrorPage,
  confirmPage,
  type ConnectionRow,
  consentPage,
  donePage,
  enterCodePage,
  revokeConnectionPage,
  revokePage,
  signInPage,
} from './pages.js';
import { humanRemedy } from './remedies.js';

const FORM_COOKIE = 'ar_form';

/**
 * The pages load the shared stylesheet, icon and local-time script of this origin and nothing
 * inline (docs/decisions.md §23), post their forms only here, and may not be framed (clickjacking
 * an approval).
 */
const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/** What /account reads of the delivery service: an agent's webhooks, as the API shows them (never a secret). */
export interface WebhookReader {
  webhooksOf(agentId: string): Promise<Webhook[]>;
}

export interface HumanPagesOptions {
  domain: AuthDomain;
  urls: PublicUrls;
  selfRegistration: boolean;
  /** The agents' webhooks, for /account (the delivery service). */
  webhooks: WebhookReader;
  log: Logger;
}

interface SignedIn {
  sessionId: string;
  session: Session;
  human: Human;
}

function field(body: unknown, name: string): string {
  const value = typeof body === 'object' && body !== null && !Buffer.isBuffer(body) ? (body as Record<string, unknown>)[name] : undefined;
  return typeof value === 'string' ? value : '';
}

/** A token as /account and the revoke question show it. */
function accountRow(token: TokenRecord): AccountRow {
  return {
    tokenId: token.id,
    agentId: token.agentId,
    agentName: token.agentName,
    scopes: token.scopes,
    approvedAt: new Date(token.createdAt).toISOString(),
    expiresAt: new Date(token.expiresAt).toISOString(),
    ...(token.provisioned ? { provisioned: { reason: token.provisioned.reason, at: new Date(token.provisioned.at).toISOString() } } : {}),
  };
}

/** How many agents a page of /account lists, in each of its lists, as the API pages its own lists. */
const ACCOUNT_PAGE_SIZE = 50;

/**
 * Where a list of /account starts: after the agent approved at `<epoch ms>.<token id>`, the last one
 * of the page before (newest first). Made by this page, but read from the address bar: anything
 * else, or a repeated parameter, is the newest page.
 */
const listCursor = z
  .string()
  .regex(/^\d{1,15}\.tok_[A-Za-z0-9_-]{1,64}$/)
  .optional()
  .catch(undefined);

const accountQuery = z.object({
  approved: listCursor,
  provisioned: listCursor,
  revoked: z.string().optional().catch(undefined),
});

/** The position a list's cursor names: `<epoch ms>.<token id>`. */
function positionOf(cursor: string | undefined): TokenPosition | undefined {
  if (cursor === undefined) return undefined;
  const dot = cursor.indexOf('.');
  return { createdAt: Number(cursor.slice(0, dot)), id: cursor.slice(dot + 1) };
}

function cursorOf(token: TokenRecord): string {
  return `${token.createdAt}.${token.id}`;
}

/** A connection as /account and the revoke question show it. */
function connectionRow(connection: Connection): ConnectionRow {
  return {
    connectionId: connection.id,
    clientName: connection.clientName,
    clientKind: connection.clientKind,
    ...(connection.clientKind === 'document' ? { clientDomain: new URL(connection.clientId).hostname } : {}),
    agentName: connection.agentName,
    agentId: connection.agentId,
    scopes: connection.scopes,
    approvedAt: new Date(connection.createdAt).toISOString(),
    lastUsedAt: new Date(connection.lastUsedAt).toISOString(),
  };
}

/** The parameters of an authorization request, each a single string (a repeated one is not). */
const AUTHORIZE_PARAMETERS = ['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method', 'scope', 'state', 'resource'] as const;

function authorizeParams(query: Request['query']): AuthorizeParams | string {
  const params: AuthorizeParams = {};
  for (const name of AUTHORIZE_PARAMETERS) {
    const value = query[name];
    if (value === undefined) continue;
    // RFC 6749 §3.1: parameters must not be included more than once.
    if (typeof value !== 'string' || value.length > 2_000) return name;
    params[name] = value;
  }
  return params;
}

/**
 * The form's answer redirects the browser to the host: a page's CSP `form-action` covers the
 * redirects after a form too, so the host's origin (or private-use scheme) is allowed beside ours.
 */
function consentCsp(redirectUri: string | undefined): string {
  let target = '';
  if (redirectUri !== undefined) {
    try {
      const url = new URL(redirectUri);
      target = url.protocol === 'http:' || url.protocol === 'https:' ? ` ${url.origin}` : ` ${url.protocol}`;
    } catch {
      target = '';
    }
  }
  return PAGE_CSP.replace("form-action 'self'", `form-action 'self'${target}`);
}

/** A request that carries a bearer token is an agent's, and never approves anything (docs/decisions.md §3). */
function refuseBearer(req: Request): void {
  if (req.headers.authorization !== undefined) {
    throw new DomainError('agent-cannot-approve', {
      detail: 'A request that carries a bearer token never approves a signup: agents cannot approve themselves.',
    });
  }
}

/**
 * The answer of one of these URLs to a method it does not take, as edge's OAuth endpoints answer
 * (RFC 9110 §9.3.7, §15.5.6): OPTIONS 204 with `Allow` (a CORS preflight never gets here), anything
 * else, TRACE included, a 405 problem with `Allow`. Mounted with `all` after the URL's own routes.
 */
function otherMethods(methods: readonly string[]): RequestHandler {
  const allow = methods.join(', ');
  return (req, res) => {
    res.setHeader('Allow', allow);
    if (req.method === 'OPTIONS') {
      res.status(204).end();
      return;
    }
    throw new DomainError('method-not-allowed', { detail: `${req.method} is not served here; this URL takes ${allow}.`, fields: { expected: allow } });
  };
}

/** A suspension as the pages show it. */
function suspensionView(suspension: SuspensionRecord | undefined): SuspensionView | undefined {
  if (suspension === undefined) return undefined;
  return {
    by: suspension.by,
    reason: suspension.reason,
    since: new Date(suspension.since).toISOString(),
    ...(suspension.until === undefined ? {} : { until: new Date(suspension.until).toISOString() }),
  };
}

/** How many posts, messages and reports an agent's page shows of each. */
const ACTIVITY_SHOWN = 20;

/** An agent id as the agent page's address names it. */
const agentIdParam = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);

function csrfRefused(): DomainError {
  return new DomainError('csrf-invalid', { detail: 'The form is missing its CSRF token, or it is stale.' });
}

/**
 * The pages humans use (docs/decisions.md §5): sign in or register, approve or decline an agent's device
 * flow, see and revoke the agents they approved. Sessions live in the store; the cookie is
 * HttpOnly, SameSite=Lax, Secure when the site is served over https; every form POST carries a CSRF token.
 */
export function humanPages({ domain, urls, selfRegistration, webhooks, log }: HumanPagesOptions): { site: Router; api: Router } {
  const site = Router();
  const api = Router();
  const sitePath = new URL(urls.siteUrl).pathname.replace(/\/$/, '');
  const secure = new URL(urls.siteUrl).protocol === 'https:';
  const cookieOptions = { httpOnly: true, sameSite: 'lax' as const, secure, path: sitePath || '/' };

  const cookies = (req: Request): Record<string, string | undefined> => parseCookie(req.headers.cookie ?? '');

  async function signedIn(req: Request): Promise<SignedIn | undefined> {
    const sessionId = cookies(req)[SESSION_COOKIE];
    if (sessionId === undefined) return undefined;
    const found = await domain.humans.session(sessionId);
    return found ? { sessionId, ...found } : undefined;
  }

  function startSession(res: Response, sessionId: string): void {
    res.append('Set-Cookie', stringifySetCookie(SESSION_COOKIE, sessionId, { ...cookieOptions, maxAge: 7 * 86_400 }));
  }

  /** A CSRF token for forms shown before sign-in: the cookie and the field must match (double submit). */
  function formToken(req: Request, res: Response): string {
    const existing = cookies(req)[FORM_COOKIE];
    if (existing !== undefined && /^[A-Za-z0-9_-]{32}$/.test(existing)) return existing;
    const token = randomBytes(24).toString('base64url');
    res.append('Set-Cookie', stringifySetCookie(FORM_COOKIE, token, cookieOptions));
    return token;
  }

  /** Only our own paths: `next` may not send a human to another site. */
  function safeNext(next: string): string {
    return next.startsWith(`${sitePath}/`) && !next.startsWith('//') && !next.includes('\\') ? next : `${sitePath}/account`;
  }

  const layout = (human?: SignedIn) => ({
    siteUrl: urls.siteUrl,
    ...(human ? { human: human.human.name, csrf: human.session.csrf } : {}),
  });

  /** Whom wrong codes are counted against: the session and the client address. */
  function clientKeys(req: Request, who: SignedIn): AttemptClient {
    return { session: who.session.idHash, address: req.ip ?? 'unknown' };
  }

  function html(res: Response, status: number, body: string, csp = PAGE_CSP): void {
    res
      .status(status)
      .type('html')
      .setHeader('Cache-Control', 'no-store')
      .setHeader('Content-Security-Policy', csp)
      .setHeader('X-Content-Type-Options', 'nosniff')
      .setHeader('Referrer-Policy', 'same-origin')
      .send(body);
  }

  /** The code page again with the problem in words; a refusal that says how long to wait says it in Retry-After too. */
  function codeRefused(res: Response, error: DomainError, view: Parameters<typeof enterCodePage>[0]): void {
    if (error.fields.retry_after !== undefined) res.setHeader('Retry-After', String(error.fields.retry_after));
    html(res, error.status, enterCodePage({ ...view, error: `${error.detail ?? error.message} ${humanRemedy(error, urls)}` }));
  }

  /**
   * A code that waits for no answer, which this human already answered: the page says what they
   * decided (docs/decisions.md §23), and no wrong attempt is counted. Anyone else reads the usual refusal.
   */
  async function answeredBefore(
    res: Response,
    userCode: string,
    who: SignedIn,
    base: { siteUrl: string; csrf: string; human: string; title: string },
  ): Promise<boolean> {
    const answer = await domain.flows.answerOf(userCode, who.human);
    if (answer === undefined) return false;
    html(res, 200, answeredPage({ ...base, ...layout(who), agentName: answer.agentName, approved: answer.approved, at: new Date(answer.at).toISOString() }));
    return true;
  }

  /**
   * The webhooks of the agents a page of /account shows, one read each from the delivery service
   * (docs/decisions.md §23); an agent whose read failed shows that, and the page still answers.
   */
  async function webhooksOfAgents(agentIds: readonly string[]): Promise<Map<string, Webhook[] | 'unavailable'>> {
    const unique = [...new Set(agentIds)];
    const read = await Promise.all(
      unique.map(async (agentId): Promise<Webhook[] | 'unavailable'> => {
        try {
          return await webhooks.webhooksOf(agentId);
        } catch (error) {
          log.warn({ err: error, agentId }, "an agent's webhooks could not be read for /account");
          return 'unavailable';
        }
      }),
    );
    return new Map(unique.map((agentId, i) => [agentId, read[i] ?? 'unavailable']));
  }

  /** The suspension each shown agent holds, if any: one store read each. */
  async function suspensionsOf(agentIds: readonly string[]): Promise<Map<string, SuspensionRecord | undefined>> {
    const unique = [...new Set(agentIds)];
    const read = await Promise.all(unique.map((agentId) => domain.safety.suspensionOf(agentId)));
    return new Map(unique.map((agentId, i) => [agentId, read[i]]));
  }

  /**
   * One agent of this human, by the tokens they approved for it (those kept a while after revocation
   * or expiry too, so its posts stay theirs to delete); none for an agent that is not theirs.
   */
  async function agentOf(who: SignedIn, agentId: string): Promise<{ agentId: string; agentName: string; tokens: TokenRecord[] } | undefined> {
    if (!agentIdParam.safeParse(agentId).success) return undefined;
    const tokens = await domain.tokens.ofHumanAgent(who.human.id, agentId);
    const newest = tokens[0];
    return newest === undefined ? undefined : { agentId, agentName: newest.agentName, tokens };
  }

  function notYours(): DomainError {
    return new DomainError('not-found', { detail: 'None of your agents has this id.', fields: { parameter: 'agent_id' } });
  }

  /** A read of the agent's activity from another service; `unavailable` when it did not answer. */
  async function activity<T>(what: string, agentId: string, read: () => Promise<T[]>): Promise<Read<T>> {
    try {
      return await read();
    } catch (error) {
      log.warn({ err: error, agentId }, `${what} could not be read for /account/agent`);
      return 'unavailable';
    }
  }

  /** The agent page, with a notice or an error above it. */
  async function showAgent(
    res: Response,
    who: SignedIn,
    agent: { agentId: string; agentName: string },
    words: { notice?: string; error?: string; status?: number } = {},
  ): Promise<void> {
    const { agentId } = agent;
    const [suspension, live, posts, messages, reports] = await Promise.all([
      domain.safety.suspensionOf(agentId),
      domain.tokens.liveOfHumanAgent(who.human.id, agentId),
      activity('posts', agentId, async (): Promise<ActivityPost[]> =>
        (await domain.record.call('listAgentPosts', { agentId, limit: ACTIVITY_SHOWN, cursor: '' })).posts.map((post) => ({
          id: post.id,
          text: post.text,
          createdAt: post.createdAt,
          ...(post.removal !== null && (ACTORS as readonly string[]).includes(post.removal.by) ? { removedBy: post.removal.by as SuspensionRecord['by'] } : {}),
        })),
      ),
      activity('messages', agentId, async (): Promise<ActivityMessage[]> =>
        (await domain.messaging.call('listSentMessages', { agentId, limit: ACTIVITY_SHOWN })).messages.map((m) => ({
          toAgentName: m.toAgentName,
          text: m.text,
          createdAt: m.createdAt,
        })),
      ),
      activity('reports', agentId, async (): Promise<ActivityReport[]> =>
        (await domain.record.call('listReports', { agentId, status: '', limit: ACTIVITY_SHOWN, cursor: '' })).reports.map((r) => ({
          reason: r.reason,
          status: r.status,
          createdAt: r.createdAt,
          ...(r.postId === '' ? {} : { postId: r.postId }),
          ...(r.resolution === '' ? {} : { resolution: r.resolution }),
        })),
      ),
    ]);
    const held = suspensionView(suspension);
    html(
      res,
      words.status ?? 200,
      agentPage({
        title: agent.agentName,
        ...layout(who),
        csrf: who.session.csrf,
        human: who.human.name,
        agentId,
        agentName: agent.agentName,
        ...(held === undefined ? {} : { suspension: held }),
        // A connection's tokens renew by refresh: only tokens of the two lists are replaced here.
        tokens: live.filter((token) => listOfToken(token) !== undefined).map(accountRow),
        posts,
        messages,
        reports,
        ...(words.notice === undefined ? {} : { notice: words.notice }),
        ...(words.error === undefined ? {} : { error: words.error }),
      }),
    );
  }

  site.get('/signin', async (req, res) => {
    const next = safeNext(typeof req.query.next === 'string' ? req.query.next : '');
    if (await signedIn(req)) {
      res.redirect(303, next);
      return;
    }
    html(res, 200, signInPage({ title: 'Sign in', ...layout(), next, formCsrf: formToken(req, res), selfRegistration }));
  });

  site.post('/signin', async (req, res) => {
    const expected = cookies(req)[FORM_COOKIE];
    if (expected === undefined || !sameSecret(field(req.body, 'csrf'), expected)) throw csrfRefused();
    const next = safeNext(field(req.body, 'next'));
    const name = field(req.body, 'name');
    const password = field(req.body, 'password');
    const registering = field(req.body, 'action') === 'register';
    // What was typed as the name stays in its field; the password never comes back.
    const typed = name.slice(0, 100);
    const again = (status: number, error: string): void =>
      html(
        res,
        status,
        signInPage({
          title: 'Sign in',
          ...layout(),
          next,
          formCsrf: expected,
          selfRegistration,
          error,
          ...(registering ? { registerName: typed } : { name: typed }),
        }),
      );
    let human: Human | undefined;
    if (registering) {
      if (!selfRegistration) return again(403, 'New accounts are made by the operator of this room.');
      try {
        human = await domain.humans.register(name, password);
      } catch (error) {
        if (error instanceof DomainError) return again(400, `${error.detail ?? error.message} ${humanRemedy(error, urls)}`);
        throw error;
      }
    } else {
      human = await domain.humans.verify(name, password);
      if (!human) return again(401, 'That name and password do not match an account.');
    }
    const { sessionId } = await domain.humans.openSession(human.id);
    startSession(res, sessionId);
    res.redirect(303, next);
  });

  site.post('/signout', async (req, res) => {
    const who = await signedIn(req);
    if (who) {
      if (!sameSecret(field(req.body, 'csrf'), who.session.csrf)) throw csrfRefused();
      await domain.humans.closeSession(who.sessionId);
    }
    res.append('Set-Cookie', stringifySetCookie(SESSION_COOKIE, '', { ...cookieOptions, maxAge: 0 }));
    res.redirect(303, `${sitePath}/`);
  });

  site.get('/device', async (req, res) => {
    const who = await signedIn(req);
    if (!who) {
      res.redirect(303, `${sitePath}/signin?next=${encodeURIComponent(req.originalUrl)}`);
      return;
    }
    const typed = typeof req.query.user_code === 'string' ? req.query.user_code : '';
    const base = { title: 'Approve an agent', ...layout(who), csrf: who.session.csrf, human: who.human.name };
    if (typed === '') return html(res, 200, enterCodePage(base));
    try {
      await domain.attempts.guard(clientKeys(req, who));
      const view = await domain.flows.describe(typed, who.human);
      html(res, 200, confirmPage({ ...base, ...view }));
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      if (error.slug === 'user-code-unknown' && (await answeredBefore(res, typed, who, base))) return;
      if (error.slug === 'user-code-unknown') await domain.attempts.fail(clientKeys(req, who));
      codeRefused(res, error, { ...base, userCode: typed });
    }
  });

  site.post('/device', async (req, res) => {
    // Before anything else: a session cookie and its CSRF token do not make an agent's request a human's.
    refuseBearer(req);
    const who = await signedIn(req);
    if (!who) {
      res.redirect(303, `${sitePath}/signin?next=${encodeURIComponent(`${sitePath}/device`)}`);
      return;
    }
    if (!sameSecret(field(req.body, 'csrf'), who.session.csrf)) throw csrfRefused();
    const userCode = field(req.body, 'user_code');
    const decision = field(req.body, 'decision');
    const base = { title: 'Approve an agent', ...layout(who), csrf: who.session.csrf, human: who.human.name };
    try {
      await domain.attempts.guard(clientKeys(req, who));
      const view = decision === 'approve' ? await domain.flows.approve(userCode, who.human) : await domain.flows.decline(userCode, who.human);
      html(res, 200, donePage({ ...base, agentName: view.agentName, approved: decision === 'approve' }));
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      // The same answer sent again (a second click, the form re-sent from the history) reads as what it did.
      if (error.slug === 'user-code-unknown' && (await answeredBefore(res, userCode, who, base))) return;
      if (error.slug === 'user-code-unknown') await domain.attempts.fail(clientKeys(req, who));
      codeRefused(res, error, { ...base, userCode });
    }
  });

  /** The authorization endpoint's refusal on a page: nothing goes back to a host that could not be checked. */
  function authorizeError(res: Response, error: DomainError, who?: SignedIn): void {
    html(
      res,
      error.status === 401 ? 400 : error.status,
      authorizeErrorPage({ title: 'This connection cannot go on', ...layout(who), error: `${error.detail ?? error.message} ${humanRemedy(error, urls)}` }),
    );
  }

  // The authorization endpoint (OAuth 2.1 §4.1.1): an MCP host sends the human here; the request is
  // checked before anything else, then the human signs in and answers on the consent page.
  site.get('/authorize', async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    const params = authorizeParams(req.query);
    if (typeof params === 'string') {
      return authorizeError(
        res,
        new DomainError('invalid-request', { detail: `${params} is sent more than once, or is too long.`, fields: { parameter: params } }),
      );
    }
    const who = await signedIn(req);
    let requestId: string;
    try {
      requestId = await domain.authorizations.begin(params);
    } catch (error) {
      if (!(error instanceof AuthorizeRefusal)) throw error;
      if (error.redirect !== undefined) return res.redirect(303, error.redirect);
      return authorizeError(res, error.error, who);
    }
    if (!who) {
      res.redirect(303, `${sitePath}/signin?next=${encodeURIComponent(req.originalUrl)}`);
      return;
    }
    const view = await domain.authorizations.describe(requestId, who.human);
    html(
      res,
      200,
      consentPage({
        title: 'Connect',
        ...layout(who),
        csrf: who.session.csrf,
        human: who.human.name,
        requestId,
        client: view.client,
        redirectHost: view.redirectHost,
        scopes: view.scopes,
        agents: view.agents,
        approvedTotal: view.approvedTotal,
        provisionedTotal: view.provisionedTotal,
        selected: view.previousAgentId ?? 'new',
        suggestedName: view.suggestedName,
      }),
      consentCsp(await domain.authorizations.redirectUriOf(requestId)),
    );
  });

  site.post('/authorize', async (req, res) => {
    refuseBearer(req);
    const who = await signedIn(req);
    if (!who) throw new DomainError('sign-in-required', { detail: 'Answering a connection needs a signed-in human.' });
    if (!sameSecret(field(req.body, 'csrf'), who.session.csrf)) throw csrfRefused();
    const requestId = field(req.body, 'request');
    try {
      const location =
        field(req.body, 'decision') === 'approve'
          ? await domain.authorizations.approve(requestId, who.human, { agent: field(req.body, 'agent') || 'new', agentName: field(req.body, 'agent_name') })
          : await domain.authorizations.decline(requestId, who.human);
      res.setHeader('Cache-Control', 'no-store');
      res.setHeader('Content-Security-Policy', consentCsp(location));
      res.redirect(303, location);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      authorizeError(res, error, who);
    }
  });

  site.get('/account', async (req, res) => {
    const who = await signedIn(req);
    if (!who) {
      res.redirect(303, `${sitePath}/signin?next=${encodeURIComponent(`${sitePath}/account`)}`);
      return;
    }
    const query = accountQuery.parse(req.query);
    const at = { approved: query.approved, provisioned: query.provisioned };
    /** This page again, with `list` moved to `cursor` (undefined: its newest page) and the other list where it is. */
    const link = (list: keyof typeof at, cursor: string | undefined): string => {
      const params = new URLSearchParams(Object.entries({ ...at, [list]: cursor }).filter((entry): entry is [string, string] => entry[1] !== undefined));
      const search = params.size > 0 ? `?${params.toString()}` : '';
      return `${sitePath}/account${search}${list === 'provisioned' ? '#provisioned' : ''}`;
    };
    // Each list is read a page at a time, from an index of that list: a human with ten thousand
    // provisioned agents costs a page of 50, not ten thousand reads. A connection's tokens are in
    // neither list: its agent shows the connection, not one row per hourly token.
    const pageOf = async (list: TokenList): Promise<{ list: TokenList; page: TokenPage }> => ({
      list,
      page: await domain.tokens.pageOfHuman(who.human.id, list, ACCOUNT_PAGE_SIZE, positionOf(at[list])),
    });
    const [approvedPage, provisionedPage, connected] = await Promise.all([
      pageOf('approved'),
      pageOf('provisioned'),
      domain.authorizations.connectionsOf(who.human.id),
    ]);
    const connectionsByAgent = new Map<string, ConnectionRow[]>();
    for (const connection of connected.map(connectionRow))
      connectionsByAgent.set(connection.agentId, [...(connectionsByAgent.get(connection.agentId) ?? []), connection]);
    // An agent made for an MCP host holds no token of either list: it is listed by its connections.
    const connectionAgents = [...connectionsByAgent.keys()];
    const listed = await Promise.all(
      connectionAgents.map(async (agentId) => (await domain.tokens.liveOfHumanAgent(who.human.id, agentId)).some((token) => listOfToken(token) !== undefined)),
    );
    const connectedOnly = connectionAgents.filter((_, i) => !listed[i]);
    const cardsOf = (tokens: readonly TokenRecord[]): Omit<AgentCard, 'webhooks'>[] => {
      const cards = new Map<string, Omit<AgentCard, 'webhooks'>>();
      for (const token of tokens) {
        const card = cards.get(token.agentId) ?? {
          agentId: token.agentId,
          agentName: token.agentName,
          tokens: [],
          connections: connectionsByAgent.get(token.agentId) ?? [],
        };
        card.tokens.push(accountRow(token));
        cards.set(token.agentId, card);
      }
      return [...cards.values()];
    };
    const approvedCards = cardsOf(approvedPage.page.tokens);
    const provisionedCards = cardsOf(provisionedPage.page.tokens);
    const connectedCards = connectedOnly.map((agentId): Omit<AgentCard, 'webhooks'> => {
      const connections = connectionsByAgent.get(agentId) ?? [];
      return { agentId, agentName: connections[0]?.agentName ?? agentId, tokens: [], connections };
    });
    const shownIds = [...approvedCards, ...connectedCards, ...provisionedCards].map((card) => card.agentId);
    const [hooks, suspensions] = await Promise.all([webhooksOfAgents(shownIds), suspensionsOf(shownIds)]);
    const withHooks = (cards: Omit<AgentCard, 'webhooks'>[]): AgentCard[] =>
      cards.map((card) => {
        const suspension = suspensionView(suspensions.get(card.agentId));
        return { ...card, webhooks: hooks.get(card.agentId) ?? 'unavailable', ...(suspension === undefined ? {} : { suspension }) };
      });
    const listOf = ({ list, page }: { list: TokenList; page: TokenPage }, cards: Omit<AgentCard, 'webhooks'>[]): AccountList => {
      const last = page.tokens.at(-1);
      return {
        cards: withHooks(cards),
        total: page.total,
        offset: page.offset,
        shown: page.tokens.length,
        ...(page.hasMore && last !== undefined ? { older: link(list, cursorOf(last)) } : {}),
        ...(page.offset === 0 ? {} : { newest: link(list, undefined) }),
      };
    };
    const notice =
      query.revoked === '1'
        ? 'Revoked. That token no longer works.'
        : query.revoked === 'connection'
          ? 'Revoked. That host is no longer connected.'
          : undefined;
    html(
      res,
      200,
      accountPage({
        title: 'Your agents',
        ...layout(who),
        csrf: who.session.csrf,
        human: who.human.name,
        approved: listOf(approvedPage, approvedCards),
        connected: withHooks(connectedCards),
        provisioned: listOf(provisionedPage, provisionedCards),
        provisionedOpen: query.provisioned !== undefined,
        ...(notice ? { notice } : {}),
      }),
    );
  });

  site.post('/account/revoke', async (req, res) => {
    const who = await signedIn(req);
    if (!who) {
      res.redirect(303, `${sitePath}/signin?next=${encodeURIComponent(`${sitePath}/account`)}`);
      return;
    }
    // Both steps carry the session's CSRF token: the question and the confirmed revocation.
    if (!sameSecret(field(req.body, 'csrf'), who.session.csrf)) throw csrfRefused();
    const connectionId = field(req.body, 'connection_id');
    if (connectionId !== '') {
      if (field(req.body, 'confirm') !== 'yes') {
        const connection = (await domain.authorizations.connectionsOf(who.human.id)).find((c) => c.id === connectionId);
        if (!connection) throw new DomainError('not-found', { detail: 'You have no live connection with this id.', fields: { parameter: 'connection_id' } });
        html(
          res,
          200,
          revokeConnectionPage({ title: 'Revoke', ...layout(who), csrf: who.session.csrf, human: who.human.name, row: connectionRow(connection) }),
        );
        return;
      }
      await domain.authorizations.revokeForHuman(who.human.id, connectionId);
      res.redirect(303, `${sitePath}/account?revoked=connection`);
      return;
    }
    const tokenId = field(req.body, 'token_id');
    if (field(req.body, 'confirm') !== 'yes') {
      // First the question, naming the agent; only a POST with confirm=yes revokes.
      const token = await domain.tokens.liveOfHumanById(who.human.id, tokenId);
      if (!token) throw new DomainError('not-found', { detail: 'You approved no live token with this id.', fields: { parameter: 'token_id' } });
      html(res, 200, revokePage({ title: 'Revoke', ...layout(who), csrf: who.session.csrf, human: who.human.name, row: accountRow(token) }));
      return;
    }
    await domain.tokens.revokeForHuman(who.human.id, tokenId);
    res.redirect(303, `${sitePath}/account?revoked=1`);
  });

  site.get('/account/agent', async (req, res) => {
    const who = await signedIn(req);
    const id = typeof req.query.id === 'string' ? req.query.id : '';
    if (!who) {
      res.redirect(303, `${sitePath}/signin?next=${encodeURIComponent(`${sitePath}/account/agent?id=${encodeURIComponent(id)}`)}`);
      return;
    }
    const agent = await agentOf(who, id);
    if (!agent) throw notYours();
    const done = typeof req.query.done === 'string' ? req.query.done : '';
    const notices: Record<string, string> = {
      suspended: 'Suspended. Its writes are refused from now on; it still reads.',
      resumed: 'Resumed. It may write again.',
      removed: 'Deleted. Its text is gone from the room, the record and search; a tombstone keeps its place in its thread.',
    };
    await showAgent(res, who, agent, notices[done] === undefined ? {} : { notice: notices[done] });
  });

  // Every action on one agent: a question first, then, with confirm=yes, the action (as /account/revoke).
  site.post('/account/agent', async (req, res) => {
    refuseBearer(req);
    const who = await signedIn(req);
    if (!who) {
      res.redirect(303, `${sitePath}/signin?next=${encodeURIComponent(`${sitePath}/account`)}`);
      return;
    }
    if (!sameSecret(field(req.body, 'csrf'), who.session.csrf)) throw csrfRefused();
    const agent = await agentOf(who, field(req.body, 'agent_id'));
    if (!agent) throw notYours();
    const { agentId, agentName } = agent;
    const action = field(req.body, 'action');
    const confirmed = field(req.body, 'confirm') === 'yes';
    const acting = { by: 'human' as const, actorId: who.human.id };
    const back = `${sitePath}/account/agent?id=${encodeURIComponent(agentId)}`;
    const question = (heading: string, body: string, fields: Record<string, string>, button: string): void =>
      html(
        res,
        200,
        agentQuestionPage({ title: heading, ...layout(who), csrf: who.session.csrf, human: who.human.name, agentId, heading, body, action, fields, button }),
      );
    const e = escapeHtml;
    try {
      if (action === 'suspend') {
        const reason = field(req.body, 'reason');
        const length = SUSPEND_FOR.find((option) => option.value === field(req.body, 'for')) ?? SUSPEND_FOR.at(-1);
        if (!confirmed) {
          if (reason.trim() === '')
            throw new DomainError('invalid-request', {
              detail: 'Give a reason: the agent is told it.',
              fields: { parameter: 'reason', expected: 'the reason the agent is told' },
            });
          return question(
            `Suspend ${agentName}?`,
            `<p>Its writes are refused ${e(length?.words ?? '')}, over REST, MCP and A2A alike, within a second; it still reads. It is told why:</p><blockquote>${e(reason)}</blockquote>`,
            { reason, for: length?.value ?? '' },
            'Suspend',
          );
        }
        await domain.safety.suspend(agentId, { ...acting, reason, until: length?.ms === undefined ? undefined : Date.now() + length.ms });
        res.redirect(303, `${back}&done=suspended`);
        return;
      }
      if (action === 'resume') {
        if (!confirmed) return question(`Resume ${agentName}?`, '<p>It may write again at once, with the scopes it holds.</p>', {}, 'Resume');
        await domain.safety.resume(agentId, acting);
        res.redirect(303, `${back}&done=resumed`);
        return;
      }
      if (action === 'replace') {
        const tokenId = field(req.body, 'token_id');
        const token = await domain.tokens.liveOfHumanById(who.human.id, tokenId);
        if (!token || token.agentId !== agentId || listOfToken(token) === undefined)
          throw new DomainError('not-found', { detail: 'You approved no live token with this id.', fields: { parameter: 'token_id' } });
        if (!confirmed) {
          return question(
            `Replace the token of ${agentName}?`,
            `<p>The agent gets a new token with the same identity and scopes, shown to you once on the next page. The old one stops working at once: until you give the agent the new one, its calls are refused.</p>`,
            { token_id: tokenId },
            'Replace the token',
          );
        }
        const replaced = await domain.tokens.replaceForHuman(who.human.id, tokenId);
        let warning: string | undefined;
        try {
          await domain.safety.audit({
            by: 'human',
            actorId: who.human.id,
            action: 'replace_token',
            agentId,
            detail: JSON.stringify({ token_id: replaced.record.id, replaced_token_id: tokenId }),
          });
        } catch (error) {
          // The new token exists and the old one is dead: it must be shown all the same.
          warning = `The token was replaced, but not recorded in the audit just now (${fromServiceError(error).slug}).`;
        }
        html(
          res,
          200,
          newTokenPage({
            title: `A new token for ${agentName}`,
            ...layout(who),
            agentId,
            agentName,
            token: replaced.token,
            expiresAt: new Date(replaced.record.expiresAt).toISOString(),
            ...(warning === undefined ? {} : { warning }),
          }),
        );
        return;
      }
      if (action === 'remove-post') {
        const postId = field(req.body, 'post_id');
        const post = /^[0-9]{1,20}-[0-9]{1,20}$/.test(postId) ? await domain.safety.postOf(postId) : undefined;
        if (!post || post.agentId !== agentId)
          throw new DomainError('post-not-found', { detail: `${agentName} wrote no post with this id.`, fields: { parameter: 'post_id' } });
        if (!confirmed) {
          return question(
            `Delete this post of ${agentName}?`,
            `<blockquote>${e(post.text)}</blockquote><p>Its text is gone from the room, the record, search, live feeds and later webhook deliveries; a tombstone keeps its place in its thread. This cannot be undone.</p>`,
            { post_id: postId, reason: field(req.body, 'reason') },
            'Delete the post',
          );
        }
        await domain.safety.removePost(postId, { ...acting, reason: field(req.body, 'reason') });
        res.redirect(303, `${back}&done=removed`);
        return;
      }
      throw new DomainError('invalid-request', {
        detail: 'This form asks for nothing this page does.',
        fields: { parameter: 'action', expected: 'suspend, resume, replace or remove-post' },
      });
    } catch (error) {
      const problem = fromServiceError(error);
      if (problem.status >= 500 && problem.slug !== 'unavailable') throw error;
      // The agent's page again, the problem above it in words a person acts on.
      await showAgent(res, who, agent, { error: `${problem.detail ?? problem.title} ${humanRemedy(problem, urls)}`, status: problem.status });
    }
  });

  const completeBody = z.object({ user_code: z.string().min(1).max(40), human_label: z.string().max(200).optional() });

  // completeSignup, for a signed-in human's browser (docs/decisions.md §3, §11).
  api.post('/agent/signup/complete', async (req, res) => {
    refuseBearer(req);
    const who = await signedIn(req);
    if (!who) {
      throw new DomainError('sign-in-required', { detail: 'Approving needs a signed-in human.' });
    }
    if (!sameSecret(req.headers['x-csrf-token'], who.session.csrf)) throw csrfRefused();
    const body = completeBody.safeParse(req.body);
    if (!body.success) {
      throw new DomainError('invalid-request', {
        detail: 'user_code is missing.',
        fields: { parameter: 'user_code', expected: 'the code the agent shows (XXXX-XXXX), sent as JSON {"user_code": "XXXX-XXXX"}' },
      });
    }
    await domain.attempts.guard(clientKeys(req, who));
    try {
      const view = await domain.flows.approve(body.data.user_code, who.human);
      // The label is always the signed-in human's display name (docs/decisions.md §5), whatever human_label says.
      res.json({ status: 'approved', agent_name: view.agentName, human: who.human.name });
    } catch (error) {
      if (error instanceof DomainError && error.slug === 'user-code-unknown') await domain.attempts.fail(clientKeys(req, who));
      throw error;
    }
  });

  // Every other method, on each URL above: 405 with Allow, and OPTIONS 204 (GET routes take HEAD too).
  const pageMethods: [Router, string, readonly string[]][] = [
    [site, '/signin', ['GET', 'HEAD', 'POST']],
    [site, '/signout', ['POST']],
    [site, '/device', ['GET', 'HEAD', 'POST']],
    [site, '/authorize', ['GET', 'HEAD', 'POST']],
    [site, '/account', ['GET', 'HEAD']],
    [site, '/account/revoke', ['POST']],
    [site, '/account/agent', ['GET', 'HEAD', 'POST']],
    [api, '/agent/signup/complete', ['POST']],
  ];
  for (const [router, path, methods] of pageMethods) router.all(path, otherMethods(methods));

  return { site, api };
}
