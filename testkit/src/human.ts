// A human's side of the signup, over the product's own pages: register, then completeSignup with
// the session's CSRF token. It lets the bench and the tests hold a real token in any mode (embedded or cluster).

function cookieOf(response: Response, name: string): string {
  for (const line of response.headers.getSetCookie()) {
    const [pair] = line.split(';');
    if (pair?.startsWith(`${name}=`)) return pair;
  }
  throw new Error(`no ${name} cookie from ${response.url}`);
}

function hiddenField(html: string, name: string): string {
  const match = new RegExp(`name="${name}" value="([^"]+)"`).exec(html);
  if (!match?.[1]) throw new Error(`no ${name} field in the page`);
  return match[1];
}

/** A human registers on the sign-in page, as in a browser; answers their session cookie. */
export async function registerHuman(origin: string, name: string, password: string): Promise<string> {
  const signinPage = await fetch(`${origin}/signin`);
  const formCookie = cookieOf(signinPage, 'ar_form');
  const formCsrf = hiddenField(await signinPage.text(), 'csrf');
  const registered = await fetch(`${origin}/signin`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: formCookie },
    body: new URLSearchParams({ csrf: formCsrf, next: '/account', action: 'register', name, password }),
  });
  if (registered.status !== 303) throw new Error(`registering answered ${registered.status}`);
  return cookieOf(registered, 'ar_session');
}

/** Signs an agent up with `scopes`, approved by a freshly registered human; answers the token. */
export async function approvedToken(origin: string, scopes: string[], agentName: string): Promise<string> {
  return (await approvedAgent(origin, scopes, agentName)).token;
}

/** A registered human's session, and its CSRF token: what approving an agent takes. */
export interface HumanSession {
  cookie: string;
  csrf: string;
}

/** A human registers (a fresh name), and opens their account page for its CSRF token. */
export async function humanSession(origin: string): Promise<HumanSession> {
  const cookie = await registerHuman(origin, `bench-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`, 'benchmark password');
  const csrf = hiddenField(await (await fetch(`${origin}/account`, { headers: { cookie } })).text(), 'csrf');
  return { cookie, csrf };
}

/** The same, answering the agent's id beside its token; approved by `human`, or by a freshly registered one. */
export async function approvedAgent(origin: string, scopes: string[], agentName: string, human?: HumanSession): Promise<{ token: string; agentId: string }> {
  const { cookie: session, csrf: sessionCsrf } = human ?? (await humanSession(origin));

  const flow = (await (
    await fetch(`${origin}/api/agent/signup/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ scopes, agent_name: agentName }),
    })
  ).json()) as { device_code: string; user_code: string };
  const completed = await fetch(`${origin}/api/agent/signup/complete`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie: session, 'x-csrf-token': sessionCsrf },
    body: JSON.stringify({ user_code: flow.user_code }),
  });
  if (completed.status !== 200) throw new Error(`completeSignup answered ${completed.status}: ${await completed.text()}`);
  const polled = await fetch(`${origin}/api/agent/signup/poll?device_code=${flow.device_code}`);
  if (polled.status !== 200) throw new Error(`poll answered ${polled.status}: ${await polled.text()}`);
  const answer = (await polled.json()) as { access_token: string; agent_id: string };
  return { token: answer.access_token, agentId: answer.agent_id };
}
