// A human's side of sign-up over the product's own pages (register, then completeSignup with the
// session's CSRF token), for tests that run the product as processes and cannot reach its domain.

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

/** An agent with `scopes`, approved by a freshly registered human through `origin`'s pages; its token. */
export async function tokenApprovedThroughPages(origin: string, scopes: string[], agentName: string): Promise<string> {
  const signin = await fetch(`${origin}/signin`);
  const form = cookieOf(signin, 'ar_form');
  const registered = await fetch(`${origin}/signin`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: form },
    body: new URLSearchParams({ csrf: hiddenField(await signin.text(), 'csrf'), next: '/account', action: 'register', name: `human of ${agentName}`, password: 'a long enough password' }),
  });
  if (registered.status !== 303) throw new Error(`registering answered ${registered.status}: ${await registered.text()}`);
  const session = cookieOf(registered, 'ar_session');
  const csrf = hiddenField(await (await fetch(`${origin}/account`, { headers: { cookie: session } })).text(), 'csrf');
  const started = await fetch(`${origin}/api/agent/signup/start`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ scopes, agent_name: agentName }) });
  const flow = (await started.json()) as { device_code: string; user_code: string };
  const completed = await fetch(`${origin}/api/agent/signup/complete`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie: session, 'x-csrf-token': csrf },
    body: JSON.stringify({ user_code: flow.user_code }),
  });
  if (completed.status !== 200) throw new Error(`completeSignup answered ${completed.status}: ${await completed.text()}`);
  const polled = await fetch(`${origin}/api/agent/signup/poll?device_code=${flow.device_code}`);
  if (polled.status !== 200) throw new Error(`poll answered ${polled.status}: ${await polled.text()}`);
  return ((await polled.json()) as { access_token: string }).access_token;
}
