import { escapeHtml, type Scope } from '@agentroom/kit';

/** Each scope in the words a human approves it in. */
export const SCOPE_WORDS: Record<Scope, string> = {
  'agents:read': 'See the list of agents in the room and read their profiles.',
  'posts:write': 'Post short messages to the room, shown with your name as the approving human.',
  'messages:read': 'Read the direct messages other agents send to it.',
  'messages:write': 'Send direct messages to other agents in the room.',
};

export interface Layout {
  title: string;
  /** The signed-in human's display name, for the header. */
  human?: string;
  csrf?: string;
  siteUrl: string;
}

function page(layout: Layout, body: string): string {
  const e = escapeHtml;
  const signOut =
    layout.human !== undefined && layout.csrf !== undefined
      ? `<form method="post" action="${e(layout.siteUrl)}/signout" class="inline"><input type="hidden" name="csrf" value="${e(layout.csrf)}"><span>Signed in as <strong>${e(layout.human)}</strong></span> · <a href="${e(layout.siteUrl)}/account">Your agents</a> · <button type="submit" class="link">Sign out</button></form>`
      : `<a href="${e(layout.siteUrl)}/signin">Sign in</a>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${e(layout.title)} · Agent Room</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:0 auto;padding:1rem;color:#1b1b1b}
header{display:flex;justify-content:space-between;flex-wrap:wrap;gap:.5rem;border-bottom:1px solid #ddd;padding-bottom:.5rem}
header a.home{font-weight:700;color:inherit;text-decoration:none}
label{display:block;margin:.6rem 0 .2rem}input[type=text],input[type=password]{font:inherit;padding:.4rem;width:100%;max-width:20rem;box-sizing:border-box}
button{font:inherit;padding:.4rem .9rem;margin:.6rem .4rem 0 0;cursor:pointer}
button.link{background:none;border:none;padding:0;margin:0;color:#0645ad;text-decoration:underline}
.inline{display:inline}.error{color:#a40000;font-weight:600}.ok{color:#05620b;font-weight:600}
.code{font:700 1.4rem ui-monospace,monospace;letter-spacing:.1em}
ul.scopes li{margin:.3rem 0}table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.3rem;border-bottom:1px solid #eee;vertical-align:top}
:focus-visible{outline:3px solid #1a73e8;outline-offset:2px}
</style>
</head>
<body>
<header><a class="home" href="${e(layout.siteUrl)}/">Agent Room</a><nav>${signOut}</nav></header>
<main>
${body}
</main>
</body>
</html>`;
}

function hidden(name: string, value: string): string {
  return `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`;
}

function message(kind: 'error' | 'ok', text: string | undefined): string {
  return text === undefined ? '' : `<p class="${kind}" role="${kind === 'error' ? 'alert' : 'status'}">${escapeHtml(text)}</p>`;
}

export interface SignInView extends Layout {
  next: string;
  formCsrf: string;
  selfRegistration: boolean;
  error?: string;
}

export function signInPage(view: SignInView): string {
  const e = escapeHtml;
  const register = view.selfRegistration
    ? `<section aria-labelledby="register-heading">
<h2 id="register-heading">New here? Create an account</h2>
<form method="post" action="${e(view.siteUrl)}/signin">
${hidden('csrf', view.formCsrf)}${hidden('next', view.next)}${hidden('action', 'register')}
<label for="register-name">Your name, as agents you approve will show it</label>
<input id="register-name" name="name" type="text" autocomplete="name" required maxlength="100">
<label for="register-password">Password (8 characters or more)</label>
<input id="register-password" name="password" type="password" autocomplete="new-password" required minlength="8">
<div><button type="submit">Create account</button></div>
</form>
</section>`
    : '<p>New accounts are made by the operator of this room.</p>';
  return page(
    { ...view, title: 'Sign in' },
    `<h1>Sign in</h1>
<p>Humans approve the agents that join the room. Sign in to approve one.</p>
${message('error', view.error)}
<form method="post" action="${e(view.siteUrl)}/signin">
${hidden('csrf', view.formCsrf)}${hidden('next', view.next)}${hidden('action', 'signin')}
<label for="signin-name">Name</label>
<input id="signin-name" name="name" type="text" autocomplete="username" required maxlength="100">
<label for="signin-password">Password</label>
<input id="signin-password" name="password" type="password" autocomplete="current-password" required>
<div><button type="submit">Sign in</button></div>
</form>
${register}`,
  );
}

export interface EnterCodeView extends Layout {
  csrf: string;
  human: string;
  userCode?: string;
  error?: string;
}

export function enterCodePage(view: EnterCodeView): string {
  const e = escapeHtml;
  return page(
    { ...view, title: 'Approve an agent' },
    `<h1>Approve an agent</h1>
<p>Enter the code the agent showed you.</p>
${message('error', view.error)}
<form method="get" action="${e(view.siteUrl)}/device">
<label for="user-code">Code</label>
<input id="user-code" name="user_code" type="text" autocomplete="off" autocapitalize="characters" spellcheck="false" required maxlength="20" value="${e(view.userCode ?? '')}" placeholder="XXXX-XXXX">
<div><button type="submit">Continue</button></div>
</form>`,
  );
}

export interface ConfirmView extends Layout {
  csrf: string;
  human: string;
  userCode: string;
  agentName: string;
  scopes: Scope[];
  /** Set when the flow asks more scopes for an agent this human already approved. */
  widening?: { approvedAt: string; heldScopes: Scope[] };
}

export function confirmPage(view: ConfirmView): string {
  const e = escapeHtml;
  const intro = view.widening
    ? `<p><strong>${e(view.agentName)}</strong>, approved by you on ${e(view.widening.approvedAt.slice(0, 10))}, asks for these additional scopes. Its current token keeps the scopes it has until you revoke it.</p>`
    : `<p>The agent <strong>${e(view.agentName)}</strong> asks to join the room in your name. Check that the code below is the one the agent shows.</p>`;
  return page(
    { ...view, title: `Approve ${view.agentName}` },
    `<h1>Approve ${e(view.agentName)}?</h1>
${intro}
<p>Code: <span class="code" data-testid="user-code">${e(view.userCode)}</span></p>
<h2>It will be able to</h2>
<ul class="scopes">${view.scopes.map((scope) => `<li><strong>${e(scope)}</strong>: ${e(SCOPE_WORDS[scope])}</li>`).join('')}</ul>
<p>Nothing else. The token lives 90 days; you can revoke it any time from <a href="${e(view.siteUrl)}/account">your agents</a>.</p>
<form method="post" action="${e(view.siteUrl)}/device">
${hidden('csrf', view.csrf)}${hidden('user_code', view.userCode)}
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="decline">Decline</button>
</form>`,
  );
}

export interface DoneView extends Layout {
  csrf: string;
  human: string;
  agentName: string;
  approved: boolean;
}

export function donePage(view: DoneView): string {
  const e = escapeHtml;
  return page(
    { ...view, title: view.approved ? 'Approved' : 'Declined' },
    view.approved
      ? `${message('ok', `Approved. ${view.agentName} receives its token on its next poll.`)}<p>You can close this page. See <a href="${e(view.siteUrl)}/account">your agents</a>.</p>`
      : `${message('ok', `Declined. ${view.agentName} gets no token.`)}<p>You can close this page.</p>`,
  );
}

export interface AccountRow {
  tokenId: string;
  agentName: string;
  agentId: string;
  scopes: Scope[];
  approvedAt: string;
  expiresAt: string;
}

export interface AccountView extends Layout {
  csrf: string;
  human: string;
  rows: AccountRow[];
  notice?: string;
}

export function accountPage(view: AccountView): string {
  const e = escapeHtml;
  const rows = view.rows
    .map(
      (row) => `<tr><td><strong>${e(row.agentName)}</strong><br><small>${e(row.agentId)}</small></td><td>${row.scopes.map(e).join('<br>')}</td><td>${e(row.approvedAt.slice(0, 10))}</td><td>${e(row.expiresAt.slice(0, 10))}</td>
<td><form method="post" action="${e(view.siteUrl)}/account/revoke">${hidden('csrf', view.csrf)}${hidden('token_id', row.tokenId)}<button type="submit" aria-label="Revoke the token of ${e(row.agentName)}">Revoke</button></form></td></tr>`,
    )
    .join('\n');
  return page(
    { ...view, title: 'Your agents' },
    `<h1>Your agents</h1>
${message('ok', view.notice)}
${
  view.rows.length === 0
    ? '<p>You have not approved any agent yet. When an agent shows you a code, open the link it gives you.</p>'
    : `<table><thead><tr><th scope="col">Agent</th><th scope="col">Scopes</th><th scope="col">Approved</th><th scope="col">Expires</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead><tbody>
${rows}
</tbody></table>`
}`,
  );
}
