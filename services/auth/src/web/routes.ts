import { randomBytes } from 'node:crypto';
import { DomainError, type PublicUrls, sameSecret, SESSION_COOKIE } from '@agentroom/kit';
import { parseCookie, stringifySetCookie } from 'cookie';
import { type Request, type Response, Router } from 'express';
import { z } from 'zod';
import type { AttemptClient } from '../attempt-limiter.js';
import type { AuthDomain } from '../domain.js';
import type { Human, Session, TokenRecord } from '../records.js';
import { type AccountRow, accountPage, confirmPage, donePage, enterCodePage, revokePage, signInPage } from './pages.js';
import { humanRemedy } from './remedies.js';

const FORM_COOKIE = 'ar_form';

/**
 * The pages run no script at all, style themselves with one inline sheet, post their forms only
 * here, and may not be framed (clickjacking an approval).
 */
const PAGE_CSP = "default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

export interface HumanPagesOptions {
  domain: AuthDomain;
  urls: PublicUrls;
  selfRegistration: boolean;
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

/** A request that carries a bearer token is an agent's, and never approves anything (docs/decisions.md §3). */
function refuseBearer(req: Request): void {
  if (req.headers.authorization !== undefined) {
    throw new DomainError('agent-cannot-approve', { detail: 'A request that carries a bearer token never approves a signup: agents cannot approve themselves.' });
  }
}

function csrfRefused(): DomainError {
  return new DomainError('csrf-invalid', { detail: 'The form is missing its CSRF token, or it is stale.' });
}

/**
 * The pages humans use (docs/decisions.md §5): sign in or register, approve or decline an agent's device
 * flow, see and revoke the agents they approved. Sessions live in the store; the cookie is
 * HttpOnly, SameSite=Lax, Secure when the site is served over https; every form POST carries a CSRF token.
 */
export function humanPages({ domain, urls, selfRegistration }: HumanPagesOptions): { site: Router; api: Router } {
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

  function html(res: Response, status: number, body: string): void {
    res
      .status(status)
      .type('html')
      .setHeader('Cache-Control', 'no-store')
      .setHeader('Content-Security-Policy', PAGE_CSP)
      .setHeader('X-Content-Type-Options', 'nosniff')
      .setHeader('Referrer-Policy', 'same-origin')
      .send(body);
  }

  /** The code page again with the problem in words; a refusal that says how long to wait says it in Retry-After too. */
  function codeRefused(res: Response, error: DomainError, view: Parameters<typeof enterCodePage>[0]): void {
    if (error.fields.retry_after !== undefined) res.setHeader('Retry-After', String(error.fields.retry_after));
    html(res, error.status, enterCodePage({ ...view, error: `${error.detail ?? error.message} ${humanRemedy(error, urls)}` }));
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
    const again = (status: number, error: string): void =>
      html(res, status, signInPage({ title: 'Sign in', ...layout(), next, formCsrf: expected, selfRegistration, error }));
    let human: Human | undefined;
    if (field(req.body, 'action') === 'register') {
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
      if (error.slug === 'user-code-unknown') await domain.attempts.fail(clientKeys(req, who));
      codeRefused(res, error, { ...base, userCode });
    }
  });

  site.get('/account', async (req, res) => {
    const who = await signedIn(req);
    if (!who) {
      res.redirect(303, `${sitePath}/signin?next=${encodeURIComponent(`${sitePath}/account`)}`);
      return;
    }
    const rows = (await domain.tokens.liveOfHuman(who.human.id)).map(accountRow);
    const notice = req.query.revoked === '1' ? 'Revoked. That token no longer works.' : undefined;
    html(res, 200, accountPage({ title: 'Your agents', ...layout(who), csrf: who.session.csrf, human: who.human.name, rows, ...(notice ? { notice } : {}) }));
  });

  site.post('/account/revoke', async (req, res) => {
    const who = await signedIn(req);
    if (!who) {
      res.redirect(303, `${sitePath}/signin?next=${encodeURIComponent(`${sitePath}/account`)}`);
      return;
    }
    // Both steps carry the session's CSRF token: the question and the confirmed revocation.
    if (!sameSecret(field(req.body, 'csrf'), who.session.csrf)) throw csrfRefused();
    const tokenId = field(req.body, 'token_id');
    if (field(req.body, 'confirm') !== 'yes') {
      // First the question, naming the agent; only a POST with confirm=yes revokes.
      const token = tokenId === '' ? undefined : (await domain.tokens.liveOfHuman(who.human.id)).find((t) => t.id === tokenId);
      if (!token) throw new DomainError('not-found', { detail: 'You approved no live token with this id.', fields: { parameter: 'token_id' } });
      html(res, 200, revokePage({ title: 'Revoke', ...layout(who), csrf: who.session.csrf, human: who.human.name, row: accountRow(token) }));
      return;
    }
    await domain.tokens.revokeForHuman(who.human.id, tokenId);
    res.redirect(303, `${sitePath}/account?revoked=1`);
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
      throw new DomainError('invalid-request', { detail: 'user_code is missing.', fields: { parameter: 'user_code', expected: 'the code the agent shows (XXXX-XXXX), sent as JSON {"user_code": "XXXX-XXXX"}' } });
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

  return { site, api };
}
