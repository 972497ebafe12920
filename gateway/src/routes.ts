import type { PublicUrls } from '@agentroom/kit/config';

/** Who answers a route: a service, or the gateway itself for the static discovery documents. */
export type Upstream = 'edge' | 'auth' | 'gateway';

/**
 * Which public address a route hangs off (docs/decisions.md §1): below `{site_url}`, `{api_url}` or
 * `{base_url}`, or at the root of the site's or the API's host whatever path their URL has (where
 * RFC 8414 §3.1 and RFC 9728 §3.1 put well-known metadata).
 */
export type Base = 'site' | 'api' | 'base' | 'site-origin' | 'api-origin';

export interface Route {
  base: Base;
  /**
   * Path below the base; with `prefix`, everything under it. `{site}` and `{api}` stand for the path
   * of `{site_url}` and of `{api_url}` (empty at a host's root), for metadata whose location follows
   * an identifier's path.
   */
  path: string;
  match: 'exact' | 'prefix';
  /** Only when the site and the API live on two hosts. */
  apart?: boolean;
  upstream: Upstream;
  /** Long-lived responses (SSE, MCP streams): proxies must not time them out. */
  streaming?: boolean;
  /** What lives here, for people reading the table. */
  what: string;
}

/**
 * The route table (docs/decisions.md §1), as data. The local router reads it now; the Envoy bootstrap will
 * be rendered from it. Most specific first; anything unmatched goes to the catch-all (edge),
 * which answers the 404 problem with RateLimit headers.
 */
export const ROUTES: readonly Route[] = [
  { base: 'site', path: '/.well-known/oauth-authorization-server', match: 'exact', upstream: 'gateway', what: 'RFC 8414 metadata' },
  {
    base: 'site-origin',
    path: '/.well-known/oauth-authorization-server{site}',
    match: 'exact',
    upstream: 'gateway',
    what: "RFC 8414 metadata where §3.1 puts it for an issuer with a path (the same route as the one above when the site's URL has none)",
  },
  { base: 'site', path: '/.well-known/oauth-protected-resource', match: 'exact', upstream: 'gateway', what: 'RFC 9728 metadata of the API' },
  {
    base: 'api-origin',
    path: '/.well-known/oauth-protected-resource{api}',
    match: 'exact',
    upstream: 'gateway',
    what: "RFC 9728 metadata of the API ({api_url}) where §3.1 puts it, on the API's host: what REST's and A2A's 401 challenges name",
  },
  {
    base: 'site',
    path: '/.well-known/oauth-protected-resource{api}',
    match: 'exact',
    apart: true,
    upstream: 'gateway',
    what: "RFC 9728 metadata of the API, on the site's host too when the API lives on another",
  },
  {
    base: 'api-origin',
    path: '/.well-known/oauth-protected-resource{api}/mcp',
    match: 'exact',
    upstream: 'gateway',
    what: "RFC 9728 metadata of MCP ({api_url}/mcp) where §3.1 puts it, on the API's host: what MCP's 401 challenge names",
  },
  {
    base: 'site',
    path: '/.well-known/oauth-protected-resource{api}/mcp',
    match: 'exact',
    apart: true,
    upstream: 'gateway',
    what: "RFC 9728 metadata of MCP, on the site's host too when the API lives on another",
  },
  { base: 'site', path: '/.well-known/ai-agent.json', match: 'exact', upstream: 'gateway', what: 'the manifest: every other URL' },
  { base: 'site', path: '/.well-known/agent-card.json', match: 'exact', upstream: 'edge', what: "the room's A2A card (1.0, or 0.3 by A2A-Version)" },
  { base: 'site', path: '/openapi.json', match: 'exact', upstream: 'gateway', what: 'OpenAPI 3.1 of the REST API' },
  { base: 'site', path: '/llms.txt', match: 'exact', upstream: 'gateway', what: 'the guide for LLM agents' },
  { base: 'site', path: '/auth.md', match: 'exact', upstream: 'gateway', what: 'the authentication guide' },
  { base: 'site', path: '/developers', match: 'exact', upstream: 'gateway', what: 'the developer portal' },
  { base: 'site', path: '/developers/', match: 'prefix', upstream: 'gateway', what: "the API reference and the portal's assets" },
  { base: 'site', path: '/problems', match: 'exact', upstream: 'gateway', what: 'every problem type' },
  { base: 'site', path: '/problems/', match: 'prefix', upstream: 'gateway', what: 'one page per problem type: the `type` of every problem document' },
  { base: 'site', path: '/', match: 'exact', upstream: 'edge', what: 'the room, for humans' },
  { base: 'site', path: '/assets/site.css', match: 'exact', upstream: 'gateway', what: "every human page's stylesheet" },
  { base: 'site', path: '/assets/site.js', match: 'exact', upstream: 'gateway', what: "every human page's script: times in the reader's time zone" },
  { base: 'site', path: '/favicon.svg', match: 'exact', upstream: 'gateway', what: "the room's icon, linked from every human page" },
  { base: 'site', path: '/favicon.ico', match: 'exact', upstream: 'gateway', what: 'the same icon, where browsers look for one a document does not link' },
  { base: 'site', path: '/assets/', match: 'prefix', upstream: 'edge', what: "the room page's script" },
  { base: 'site', path: '/signin', match: 'exact', upstream: 'auth', what: 'humans sign in or register' },
  { base: 'site', path: '/signout', match: 'exact', upstream: 'auth', what: 'humans sign out' },
  { base: 'site', path: '/device', match: 'exact', upstream: 'auth', what: 'humans approve or decline an agent' },
  {
    base: 'site',
    path: '/authorize',
    match: 'exact',
    upstream: 'auth',
    what: 'the OAuth authorization endpoint: humans sign in and approve or decline an MCP host',
  },
  { base: 'site', path: '/account', match: 'exact', upstream: 'auth', what: 'humans see their agents' },
  { base: 'site', path: '/account/revoke', match: 'exact', upstream: 'auth', what: 'humans revoke an agent' },
  {
    base: 'site',
    path: '/account/agent',
    match: 'exact',
    upstream: 'auth',
    what: "humans see one agent's activity, suspend or resume it, replace its token, delete its posts",
  },
  { base: 'site', path: '/moderation', match: 'exact', upstream: 'edge', what: "the public moderation log: what the room's moderators did, and why" },
  { base: 'site', path: '/moderation/', match: 'prefix', upstream: 'auth', what: "the moderators' queue of reports, and its actions" },
  { base: 'api', path: '/agent/signup/complete', match: 'exact', upstream: 'auth', what: 'completeSignup, the human step' },
  { base: 'api', path: '/agent/signup/start', match: 'exact', upstream: 'edge', what: 'startSignup' },
  { base: 'api', path: '/agent/signup/poll', match: 'exact', upstream: 'edge', what: 'pollSignup' },
  { base: 'api', path: '/agent/token/rotate', match: 'exact', upstream: 'edge', what: 'rotateToken' },
  { base: 'api', path: '/agent/feedback', match: 'exact', upstream: 'edge', what: 'sendFeedback' },
  { base: 'api', path: '/mcp', match: 'exact', upstream: 'edge', streaming: true, what: 'MCP, Streamable HTTP' },
  { base: 'api', path: '/a2a', match: 'exact', upstream: 'edge', streaming: true, what: "A2A, the room's endpoint (a message is a post)" },
  { base: 'api', path: '/a2a/', match: 'prefix', upstream: 'edge', streaming: true, what: 'A2A, one endpoint and card per agent' },
  { base: 'api', path: '/oauth/', match: 'prefix', upstream: 'edge', what: 'standard OAuth endpoints' },
  { base: 'base', path: '/', match: 'prefix', upstream: 'edge', streaming: true, what: 'the versioned REST API' },
];

/** Where unmatched requests go: edge answers them with the 404 problem. */
export const CATCH_ALL: Exclude<Upstream, 'gateway'> = 'edge';

export interface ResolvedRoute {
  /** `host[:port]` the route belongs to, or undefined when site and API share one origin. */
  host: string | undefined;
  /** The full request path (exact) or path prefix. */
  path: string;
  match: 'exact' | 'prefix';
  upstream: Upstream;
  streaming: boolean;
  /** The table's `what`. */
  what: string;
}

/** The path of a URL without its terminating slash: empty at a host's root. */
function pathOf(url: URL): string {
  return url.pathname.replace(/\/$/, '');
}

/**
 * Places the table at the deployment's addresses. A route that lands where an earlier one already
 * is (the same host, path and match: RFC 8414's two locations, for a site without a path) is left
 * out, as are the `apart` routes when site and API share a host.
 */
export function resolveRoutes(urls: PublicUrls, routes: readonly Route[] = ROUTES): ResolvedRoute[] {
  const site = new URL(urls.siteUrl);
  const api = new URL(urls.apiUrl);
  const base = new URL(urls.baseUrl);
  const sameOrigin = site.host === api.host;
  const bases: Record<Base, { host: string; root: string }> = {
    site: { host: site.host, root: pathOf(site) },
    api: { host: api.host, root: pathOf(api) },
    base: { host: base.host, root: pathOf(base) },
    'site-origin': { host: site.host, root: '' },
    'api-origin': { host: api.host, root: '' },
  };
  const resolved: ResolvedRoute[] = [];
  for (const route of routes) {
    if (route.apart === true && sameOrigin) continue;
    const at = bases[route.base];
    const below = route.path.replaceAll('{site}', pathOf(site)).replaceAll('{api}', pathOf(api));
    const placed: ResolvedRoute = {
      host: sameOrigin ? undefined : at.host,
      path: below === '/' && route.match === 'exact' ? at.root || '/' : `${at.root}${below}`,
      match: route.match,
      upstream: route.upstream,
      streaming: route.streaming ?? false,
      what: route.what,
    };
    if (resolved.some((other) => other.host === placed.host && other.path === placed.path && other.match === placed.match)) continue;
    resolved.push(placed);
  }
  return resolved;
}

/** The first route that takes this host and path, or undefined for the catch-all. */
export function matchRoute(routes: readonly ResolvedRoute[], host: string | undefined, path: string): ResolvedRoute | undefined {
  return routes.find(
    (route) => (route.host === undefined || route.host === host) && (route.match === 'exact' ? path === route.path : path.startsWith(route.path)),
  );
}
