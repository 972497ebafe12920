import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';

function cookieOf(response: Response, name: string): string | undefined {
  const cookie = response.headers.getSetCookie().find((c) => c.startsWith(`${name}=`));
  return cookie === undefined ? undefined : decodeURIComponent(cookie.split(';')[0]?.slice(name.length + 1) ?? '');
}

describe('human pages against a hostile web', () => {
  let app: Embedded;
  let site: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    site = app.urls.siteUrl;
    await app.auth.humans.register('Ada Lovelace', 'analytical-engine-1843');
  });

  afterAll(async () => {
    await app.stop();
  });

  /** Signs in through the real form, sending whatever cookie and `next` the caller chooses. */
  async function signIn(next: string, extraCookie = ''): Promise<Response> {
    const form = await fetch(`${site}/signin`);
    const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? '';
    const formCookie = `ar_form=${encodeURIComponent(cookieOf(form, 'ar_form') ?? '')}`;
    return fetch(`${site}/signin`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: [formCookie, extraCookie].filter(Boolean).join('; ') },
      body: new URLSearchParams({ csrf, name: 'Ada Lovelace', password: 'analytical-engine-1843', next }).toString(),
    });
  }

  it('gives a new session id at sign-in, whatever session cookie came with the form (no fixation)', async () => {
    const planted = 'attacker-chosen-session-id-0123456789';
    const response = await signIn('/account', `ar_session=${planted}`);
    expect(response.status).toBe(303);
    const issued = cookieOf(response, 'ar_session');
    expect(issued).toBeDefined();
    expect(issued).not.toBe(planted);
    // The planted id opens nothing.
    const withPlanted = await fetch(`${site}/account`, { redirect: 'manual', headers: { cookie: `ar_session=${planted}` } });
    expect(withPlanted.status).toBe(303);
    expect(withPlanted.headers.get('location')).toContain('/signin');
    const withIssued = await fetch(`${site}/account`, { redirect: 'manual', headers: { cookie: `ar_session=${encodeURIComponent(issued ?? '')}` } });
    expect(withIssued.status).toBe(200);
  });

  it.each(['https://evil.example/', '//evil.example/x', '/\\evil.example', 'javascript:alert(1)', 'http://localhost.evil.example/', '/%2F%2Fevil.example'])(
    'sends sign-in only to a page of this site, never to %s',
    async (next) => {
      const response = await signIn(next);
      expect(response.status).toBe(303);
      const location = new URL(response.headers.get('location') ?? '', site);
      expect(location.origin).toBe(new URL(site).origin);
      expect(location.pathname.startsWith('//')).toBe(false);
    },
  );

  it('keeps a same-site next', async () => {
    const response = await signIn('/account');
    expect(new URL(response.headers.get('location') ?? '', site).pathname).toBe('/account');
  });

  it('refuses every human form without its CSRF token', async () => {
    const session = cookieOf(await signIn('/'), 'ar_session') ?? '';
    const cookie = `ar_session=${encodeURIComponent(session)}`;
    const forms: [string, Record<string, string>][] = [
      ['/signin', { name: 'Ada Lovelace', password: 'analytical-engine-1843' }],
      ['/signout', {}],
      ['/device', { user_code: 'BCDF-GHJK', decision: 'approve' }],
      ['/account/revoke', { token_id: 'x', confirm: 'yes' }],
      ['/account/agent', { agent_id: 'a_x', action: 'suspend', reason: 'x', confirm: 'yes' }],
      ['/', { text: 'posted without a token of the form', agent_id: 'a_x' }],
    ];
    for (const [path, fields] of forms) {
      for (const csrf of [undefined, 'forged-csrf-token-0123456789abcdef']) {
        const body = new URLSearchParams({ ...fields, ...(csrf === undefined ? {} : { csrf }) }).toString();
        const response = await fetch(`${site}${path}`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
          body,
        });
        expect([400, 403], `${path} with csrf ${csrf ?? 'missing'}`).toContain(response.status);
      }
    }
    // The session still works: nothing above signed it out.
    expect((await fetch(`${site}/account`, { redirect: 'manual', headers: { cookie } })).status).toBe(200);
  });

  it('sends security headers with every page: CSP without inline script, no framing, nosniff, a referrer policy', async () => {
    const session = cookieOf(await signIn('/'), 'ar_session') ?? '';
    const cookie = `ar_session=${encodeURIComponent(session)}`;
    const pages: [string, boolean][] = [
      ['/', true],
      ['/signin', false],
      ['/device', true],
      ['/account', true],
      ['/developers', false],
      ['/developers/reference', false],
      ['/developers/reference/interactive', false],
      ['/problems', false],
      ['/problems/not-found', false],
    ];
    for (const [path, signedIn] of pages) {
      const response = await fetch(`${site}${path}`, { redirect: 'manual', headers: signedIn ? { cookie } : {} });
      expect(response.status, path).toBe(200);
      const csp = response.headers.get('content-security-policy') ?? '';
      const scriptSrc = /script-src ([^;]+)/.exec(csp)?.[1] ?? /default-src ([^;]+)/.exec(csp)?.[1] ?? '';
      expect(scriptSrc, `${path} script-src`).not.toBe('');
      expect(scriptSrc, `${path} script-src`).not.toContain("'unsafe-inline'");
      expect(csp, `${path} frame-ancestors`).toContain("frame-ancestors 'none'");
      expect(response.headers.get('x-content-type-options'), `${path} nosniff`).toBe('nosniff');
      expect(response.headers.get('referrer-policy'), `${path} referrer policy`).toMatch(
        /^(no-referrer|same-origin|strict-origin|strict-origin-when-cross-origin)$/,
      );
    }
  });
});
