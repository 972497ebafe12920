import { createHash, randomBytes } from 'node:crypto';
import type { Embedded } from '../../launcher/src/embedded.js';

/** Where the hosts of these tests say the browser goes back to; nothing listens there. */
export const HOST_REDIRECT = 'http://127.0.0.1:8976/callback';

export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** An MCP host registered by RFC 7591 dynamic registration; answers its client_id. */
export async function registerHost(app: Embedded, name: string): Promise<string> {
  const registered = await fetch(`${app.urls.apiUrl}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ redirect_uris: [HOST_REDIRECT], client_name: name, token_endpoint_auth_method: 'none' }),
  });
  if (registered.status !== 201) throw new Error(`registration answered ${registered.status}: ${await registered.text()}`);
  return ((await registered.json()) as { client_id: string }).client_id;
}

/**
 * A host connected as a human's agent, as a browser and the host would do it: the consent page
 * (signed in by `cookie`), the human's approval as `agent` ('new', named `agentName`, or an agent
 * id), then the code exchanged at the token endpoint. Answers the host's tokens.
 */
export async function connectHost(
  app: Embedded,
  cookie: string,
  clientId: string,
  agent: string,
  agentName = '',
): Promise<{ access_token: string; refresh_token: string; agent_id: string }> {
  const { verifier, challenge } = pkce();
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: HOST_REDIRECT,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'state',
  });
  const consent = await (await fetch(`${app.urls.siteUrl}/authorize?${query.toString()}`, { headers: { cookie } })).text();
  const field = (name: string): string => {
    const value = new RegExp(`name="${name}" value="([^"]*)"`).exec(consent)?.[1];
    if (value === undefined) throw new Error(`the consent page has no ${name}: ${consent.slice(0, 300)}`);
    return value;
  };
  const answered = await fetch(`${app.urls.siteUrl}/authorize`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    body: new URLSearchParams({ csrf: field('csrf'), request: field('request'), agent, agent_name: agentName, decision: 'approve' }).toString(),
  });
  const code = new URL(answered.headers.get('location') ?? 'missing:').searchParams.get('code');
  if (code === null) throw new Error(`the consent answered ${answered.status} ${answered.headers.get('location') ?? ''}`);
  const token = await fetch(`${app.urls.apiUrl}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: clientId, redirect_uri: HOST_REDIRECT }).toString(),
  });
  if (token.status !== 200) throw new Error(`the token endpoint answered ${token.status}: ${await token.text()}`);
  return (await token.json()) as { access_token: string; refresh_token: string; agent_id: string };
}

/** Signs a human in through the real form; answers the session cookie, as a Cookie header. */
export async function signInCookie(app: Embedded, human: { name: string; password: string }): Promise<string> {
  const site = app.urls.siteUrl;
  const form = await fetch(`${site}/signin`);
  const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? '';
  const formCookie =
    form.headers
      .getSetCookie()
      .find((c) => c.startsWith('ar_form='))
      ?.split(';')[0] ?? '';
  const response = await fetch(`${site}/signin`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: formCookie },
    body: new URLSearchParams({ csrf, name: human.name, password: human.password, next: '/account', action: 'signin' }).toString(),
  });
  const session = response.headers
    .getSetCookie()
    .find((c) => c.startsWith('ar_session='))
    ?.split(';')[0];
  if (session === undefined) throw new Error(`sign-in answered ${response.status} with no session`);
  return session;
}
