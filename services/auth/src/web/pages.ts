import { AGENT_CHOICES, escapeHtml, type Scope } from '@agentroom/kit';

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
h1,h2,p,li,nav,table.agents td:first-child{overflow-wrap:anywhere}
header{display:flex;justify-content:space-between;flex-wrap:wrap;gap:.5rem;border-bottom:1px solid #ddd;padding-bottom:.5rem}
header a.home{font-weight:700;color:inherit;text-decoration:none}
label{display:block;margin:.6rem 0 .2rem}input[type=text],input[type=password]{font:inherit;padding:.4rem;width:100%;max-width:20rem;box-sizing:border-box}
button,a.button{font:inherit;line-height:1.25;padding:.4rem .9rem;margin:.6rem .4rem 0 0;border:1px solid #767676;border-radius:3px;background:#f3f3f3;color:inherit;cursor:pointer}
a.button{display:inline-block;text-decoration:none}
button.link{background:none;border:none;padding:0;margin:0;color:#0645ad;text-decoration:underline}
.inline{display:inline}details.group{margin:1rem 0}details.group summary{cursor:pointer}details.group summary h2{font-size:1.1rem}nav.pager{margin:.6rem 0}.error{color:#a40000;font-weight:600}.ok{color:#05620b;font-weight:600}.id,.provisioned{color:#555}
.code{font:700 1.4rem ui-monospace,monospace;letter-spacing:.1em}
ul.scopes li{margin:.3rem 0}table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.3rem;border-bottom:1px solid #eee;vertical-align:top}
td.action button{margin:0}table.agents th,table.agents td[data-label],table.agents td.scopes span{white-space:nowrap}
.visually-hidden{position:absolute;width:1px;height:1px;margin:-1px;padding:0;border:0;overflow:hidden;clip:rect(0 0 0 0);clip-path:inset(50%);white-space:nowrap}
@media (max-width:36rem){
h1{font-size:1.6rem}
table.agents,table.agents tbody,table.agents tr,table.agents td{display:block}
table.agents thead{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);clip-path:inset(50%)}
table.agents tr{border-bottom:1px solid #ddd;padding:.6rem 0}
table.agents td{border:none;padding:.1rem 0}
table.agents td[data-label]{white-space:normal}table.agents td[data-label]::before{content:attr(data-label) ": ";font-weight:600}
table.agents td.scopes br{display:none}table.agents td.scopes span:not(:last-of-type)::after{content:","}
table.agents td.action button{margin-top:.4rem}
}
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
  /** Set when an operator made the agent in this human's name: their reason, and when (RFC 3339). */
  provisioned?: { reason: string; at: string };
}

/** The line under a provisioned agent's name: the human did not approve it, and can see why it exists. */
function provisionedNote(row: AccountRow): string {
  if (!row.provisioned) return '';
  const { reason, at } = row.provisioned;
  return `<br><small class="provisioned">Provisioned by an operator: ${escapeHtml(reason)}, ${escapeHtml(at.slice(0, 10))}</small>`;
}

/** One page of a list on /account, newest first, and the links around it. */
export interface AccountList {
  rows: AccountRow[];
  /** How many there are on every page together. */
  total: number;
  /** The place of this page's first row in the whole list (0 for the newest page). */
  offset: number;
  /** The link to the next, older page; absent on the last one. */
  older?: string;
  /** The link back to the newest page; absent on that page. */
  newest?: string;
}

export interface AccountView extends Layout {
  csrf: string;
  human: string;
  /** The agents the human approved one by one. */
  approved: AccountList;
  /** The agents an operator made in the human's name (`npm run agents -- provision`), folded into one group. */
  provisioned: AccountList;
  /** Unfolds the provisioned group: the human is paging through it. */
  provisionedOpen: boolean;
  /** The MCP hosts connected by OAuth: rendered beside the tokens. */
  connections?: string;
  notice?: string;
}

/** A table of agents on wide screens; under 36rem each agent is a block of its own, labelled (see the style). */
function agentsTable(view: AccountView, rows: AccountRow[], caption: string): string {
  const e = escapeHtml;
  // The explicit roles keep the table's semantics when the style changes its display.
  const body = rows
    .map(
      (row) => `<tr role="row"><td role="cell"><strong>${e(row.agentName)}</strong><br><small class="id">${e(row.agentId)}</small>${provisionedNote(row)}</td><td role="cell" class="scopes" data-label="Scopes">${row.scopes.map((scope) => `<span>${e(scope)}</span>`).join('<br> ')}</td><td role="cell" data-label="Approved">${e(row.approvedAt.slice(0, 10))}</td><td role="cell" data-label="Expires">${e(row.expiresAt.slice(0, 10))}</td>
<td role="cell" class="action"><form method="post" action="${e(view.siteUrl)}/account/revoke">${hidden('csrf', view.csrf)}${hidden('token_id', row.tokenId)}<button type="submit" aria-label="Revoke the token of ${e(row.agentName)}">Revoke</button></form></td></tr>`,
    )
    .join('\n');
  return `<table class="agents" role="table"><caption class="visually-hidden">${e(caption)}</caption><thead role="rowgroup"><tr role="row"><th scope="col" role="columnheader">Agent</th><th scope="col" role="columnheader">Scopes</th><th scope="col" role="columnheader">Approved</th><th scope="col" role="columnheader">Expires</th><th scope="col" role="columnheader"><span class="visually-hidden">Action</span></th></tr></thead><tbody role="rowgroup">
${body}
</tbody></table>`;
}

/** Where a page of a list stands in it, and the links to the newest and the next older page. */
function pager(list: AccountList, label: string): string {
  if (list.total <= list.rows.length) return '';
  const e = escapeHtml;
  const first = list.offset + 1;
  const last = list.offset + list.rows.length;
  const links = [
    list.newest === undefined ? '' : `<a href="${e(list.newest)}">Newest</a>`,
    list.older === undefined ? '' : `<a href="${e(list.older)}" rel="next">Older</a>`,
  ].filter((link) => link !== '');
  const count = (n: number): string => n.toLocaleString('en-US');
  return `<nav class="pager" aria-label="${e(label)}"><span>${count(first)} to ${count(last)} of ${count(list.total)}, newest first</span>${links.length > 0 ? ` · ${links.join(' · ')}` : ''}</nav>`;
}

function agentsCount(count: number): string {
  return count === 1 ? '1 agent' : `${count.toLocaleString('en')} agents`;
}

export function accountPage(view: AccountView): string {
  const { approved, provisioned } = view;
  const none = approved.total === 0 && provisioned.total === 0;
  const approvedPart =
    approved.total === 0
      ? ''
      : `${agentsTable(view, approved.rows, 'The agents you approved, with what each may do')}
${pager(approved, 'Pages of the agents you approved')}`;
  // Provisioned agents can number thousands (a load test's): one folded group with its count and
  // pages of its own, so the agents approved one by one stay in view and the page stays small.
  const provisionedPart =
    provisioned.total === 0
      ? ''
      : `<details id="provisioned" class="group"${view.provisionedOpen ? ' open' : ''}><summary><h2 class="inline">Provisioned by an operator: ${agentsCount(provisioned.total)}</h2></summary>
<p>An operator made these agents in your name (for a load test, say) without asking you; each says why. Revoke any you do not want.</p>
${agentsTable(view, provisioned.rows, 'The agents an operator provisioned in your name, with what each may do')}
${pager(provisioned, 'Pages of the provisioned agents')}
</details>`;
  return page(
    { ...view, title: 'Your agents' },
    `<h1>Your agents</h1>
${message('ok', view.notice)}
${none ? (view.connections ? '' : '<p>You have not approved any agent yet. When an agent shows you a code, open the link it gives you.</p>') : ''}
${approvedPart}
${provisionedPart}
${view.connections ?? ''}`,
  );
}

export interface RevokeView extends Layout {
  csrf: string;
  human: string;
  row: AccountRow;
}

/**
 * The question before a revocation, so one stray click does not cut an agent off: it works without
 * JavaScript, since "Revoke" posts the same form again with `confirm=yes` and "Keep it" goes back.
 */
export function revokePage(view: RevokeView): string {
  const e = escapeHtml;
  const { row } = view;
  return page(
    { ...view, title: `Revoke ${row.agentName}?` },
    `<h1 id="revoke-heading">Revoke ${e(row.agentName)}?</h1>
<p>It stops working at once. Its token is refused on its next call, over REST, MCP and A2A alike; to let it back in, approve it again when it asks.</p>
<p><small class="id">Agent id ${e(row.agentId)} · ${row.provisioned ? `provisioned by an operator (${e(row.provisioned.reason)})` : 'approved'} on ${e(row.approvedAt.slice(0, 10))} · ${row.scopes.map(e).join(', ')}</small></p>
<form method="post" action="${e(view.siteUrl)}/account/revoke" aria-labelledby="revoke-heading">
${hidden('csrf', view.csrf)}${hidden('token_id', row.tokenId)}${hidden('confirm', 'yes')}
<button type="submit">Revoke</button>
<a class="button" href="${e(view.siteUrl)}/account">Keep it</a>
</form>`,
  );
}

export interface ConsentPageView extends Layout {
  csrf: string;
  human: string;
  requestId: string;
  client: { name: string; kind: 'registered' | 'document'; domain?: string; uri?: string };
  /** Where the browser goes after the answer: the host's redirect. */
  redirectHost: string;
  scopes: Scope[];
  /** The human's own agents, then the newest of those an operator provisioned in their name. */
  agents: { agentId: string; agentName: string; scopes: Scope[]; provisioned: boolean }[];
  /** How many live tokens the human approved one by one (the agents of the newest AGENT_CHOICES are listed). */
  approvedTotal: number;
  /** How many live provisioned agents the human has in all. */
  provisionedTotal: number;
  /** The agent to propose: this host's earlier one, else a new agent. */
  selected: string;
  suggestedName: string;
  error?: string;
}

/**
 * The consent page of an MCP host's connection: which host asks (a document's domain, or marked
 * unverified when it registered itself), for which scopes in plain words, and as which agent: a new
 * one named after the host, or one the human already approved (the same identity, new frozen scopes).
 */
export function consentPage(view: ConsentPageView): string {
  const e = escapeHtml;
  const { client } = view;
  const who =
    client.kind === 'document'
      ? `<strong>${e(client.name)}</strong> <span class="id">(from ${e(client.domain ?? '')})</span>`
      : `<strong>${e(client.name)}</strong> <span class="error" data-testid="unverified">(unverified: this name is the host's own claim)</span>`;
  const existing = view.agents
    .map(
      (agent) =>
        `<label><input type="radio" name="agent" value="${e(agent.agentId)}"${view.selected === agent.agentId ? ' checked' : ''}> As <strong>${e(agent.agentName)}</strong> <small class="id">${e(agent.agentId)} · today: ${agent.scopes.map(e).join(', ') || 'no scopes'}${agent.provisioned ? ' · provisioned by an operator' : ''}</small></label>`,
    )
    .join('\n');
  const provisionedShown = view.agents.filter((agent) => agent.provisioned).length;
  // An operator's thousands are not a list to choose from: the newest are offered, and the page says so.
  const notes = [
    view.approvedTotal > AGENT_CHOICES ? `Of your ${view.approvedTotal.toLocaleString('en-US')} approvals, the agents of the newest ${AGENT_CHOICES} are listed.` : '',
    view.provisionedTotal > provisionedShown ? `Of the ${view.provisionedTotal.toLocaleString('en-US')} agents an operator provisioned in your name, the newest ${provisionedShown} are listed.` : '',
  ].filter((note) => note !== '');
  const more = notes.length === 0 ? '' : `\n<p class="note">${notes.join(' ')} <a href="${e(view.siteUrl)}/account">Your agents</a> lists them all.</p>`;
  return page(
    { ...view, title: `Connect ${client.name}` },
    `<h1>Connect ${e(client.name)} to the room?</h1>
<p>The MCP host ${who} asks to act in the room in your name. After you answer, your browser goes back to <strong>${e(view.redirectHost)}</strong>.</p>
${message('error', view.error)}
<h2>It will be able to</h2>
<ul class="scopes">${view.scopes.map((scope) => `<li><strong>${e(scope)}</strong>: ${e(SCOPE_WORDS[scope])}</li>`).join('')}</ul>
<p>Nothing else. It stays connected until you revoke it from <a href="${e(view.siteUrl)}/account">your agents</a>.</p>
<form method="post" action="${e(view.siteUrl)}/authorize">
${hidden('csrf', view.csrf)}${hidden('request', view.requestId)}
<fieldset><legend>Connect it as</legend>
<label><input type="radio" name="agent" value="new"${view.selected === 'new' ? ' checked' : ''}> A new agent named</label>
<input id="agent-name" name="agent_name" type="text" maxlength="100" value="${e(view.suggestedName)}" aria-label="The new agent's name">
${existing}${more}
</fieldset>
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="decline">Decline</button>
</form>`,
  );
}

/** A request the authorization endpoint may not send back to the host: the human reads why. */
export function authorizeErrorPage(view: Layout & { error: string }): string {
  return page(
    { ...view, title: 'This connection cannot go on' },
    `<h1>This connection cannot go on</h1>
${message('error', view.error)}
<p>Nothing was approved. Go back to the MCP host and connect again; if it keeps failing, the host is misconfigured for this room.</p>`,
  );
}

export interface ConnectionRow {
  connectionId: string;
  clientName: string;
  clientKind: 'registered' | 'document';
  clientDomain?: string;
  agentName: string;
  agentId: string;
  scopes: Scope[];
  approvedAt: string;
  lastUsedAt: string;
}

/** An ISO time to the minute, as the connections list shows it (UTC). */
function minute(iso: string): string {
  return iso.slice(0, 16).replace('T', ' ');
}

/** An ISO time to the second: two installations of a host are approved moments apart. */
function second(iso: string): string {
  return iso.slice(0, 19).replace('T', ' ');
}

/**
 * The MCP hosts connected by OAuth, for /account beside the device-flow tokens. A host installed
 * twice (one client_id) is two rows as the same agent: approval time and last use tell them apart.
 */
export function connectionsSection(view: { siteUrl: string; csrf: string; connections: ConnectionRow[] }): string {
  const e = escapeHtml;
  if (view.connections.length === 0) return '';
  const rows = view.connections
    .map(
      (c) => `<tr role="row"><td role="cell"><strong>${e(c.clientName)}</strong>${c.clientKind === 'document' ? ` <small class="id">${e(c.clientDomain ?? '')}</small>` : ' <small class="id">(unverified)</small>'}<br>as ${e(c.agentName)} <small class="id">${e(c.agentId)}</small></td><td role="cell" class="scopes" data-label="Scopes">${c.scopes.map((scope) => `<span>${e(scope)}</span>`).join('<br> ')}</td><td role="cell" data-label="Approved">${e(second(c.approvedAt))}</td><td role="cell" data-label="Last used">${e(minute(c.lastUsedAt))}</td>
<td role="cell" class="action"><form method="post" action="${e(view.siteUrl)}/account/revoke">${hidden('csrf', view.csrf)}${hidden('connection_id', c.connectionId)}<button type="submit" aria-label="Revoke the connection of ${e(c.clientName)} as ${e(c.agentName)} approved ${e(second(c.approvedAt))} UTC">Revoke</button></form></td></tr>`,
    )
    .join('\n');
  return `<h2 id="connections">Connected MCP hosts</h2>
<table class="agents" role="table" data-testid="connections"><caption class="visually-hidden">The MCP hosts you connected, as which agent, with what each may do</caption><thead role="rowgroup"><tr role="row"><th scope="col" role="columnheader">Host</th><th scope="col" role="columnheader">Scopes</th><th scope="col" role="columnheader">Approved (UTC)</th><th scope="col" role="columnheader">Last used (UTC)</th><th scope="col" role="columnheader"><span class="visually-hidden">Action</span></th></tr></thead><tbody role="rowgroup">
${rows}
</tbody></table>`;
}

/** The question before a connection is revoked. */
export function revokeConnectionPage(view: Layout & { csrf: string; human: string; row: ConnectionRow }): string {
  const e = escapeHtml;
  const { row } = view;
  return page(
    { ...view, title: `Revoke ${row.clientName}?` },
    `<h1 id="revoke-heading">Revoke ${e(row.clientName)}?</h1>
<p>The host stops working as ${e(row.agentName)} at once: its access and refresh tokens are refused on their next use. To let it back in, connect it again from the host.</p>
<p><small class="id">Approved ${e(second(row.approvedAt))} UTC · last used ${e(minute(row.lastUsedAt))} UTC · ${row.scopes.map(e).join(', ')}. Other connections of this host stay.</small></p>
<form method="post" action="${e(view.siteUrl)}/account/revoke" aria-labelledby="revoke-heading">
${hidden('csrf', view.csrf)}${hidden('connection_id', row.connectionId)}${hidden('confirm', 'yes')}
<button type="submit">Revoke</button>
<a class="button" href="${e(view.siteUrl)}/account">Keep it</a>
</form>`,
  );
}
