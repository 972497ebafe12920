import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  apiResourceMetadataUrl,
  LIMITS,
  LIVE_FEED_NAMES,
  liveFeedUrl,
  MCP_PROTOCOL_REVISIONS,
  MCP_TOOL_OPERATIONS,
  mcpResourceMetadataUrl,
  mcpResourceUrl,
  oauthEndpointsOf,
  ROOM_SUMMARY,
  SCOPE_MEANINGS,
  TOKEN_GRANTS,
  urlMapOf,
  wellKnownUrlOf,
} from '@agentroom/api';
import type { PublicUrls } from '@agentroom/kit/config';
import { IDEMPOTENCY_KEY_HOURS, SCOPES } from '@agentroom/kit/domain';
import { type CachePolicy, type Compressed, digestOf, staticAsset, type StaticAsset } from '@agentroom/kit/http';
import { PROBLEM_TYPES, type ProblemSlug } from '@agentroom/kit/problems';
import { FAVICON_SVG, faviconIco, SITE_ASSETS, SITE_CSS, siteScript } from '@agentroom/kit/web';
import { authMd, llmsTxt, mcpHostSetup } from './guides.js';
import { openApiDocument } from './openapi.js';
import { developersPage, PORTAL_CSP, problemPage, problemsIndexPage, referenceCsp, referencePage, webhooksPage } from './portal.js';
import { staticReferencePage } from './reference.js';

/** One document the gateway answers itself: its bytes and how to send them. */
export interface Document {
  contentType: string;
  body: Buffer;
  /** Extra headers (a page's Content-Security-Policy). */
  headers?: Record<string, string>;
  /** How caches keep it (docs/decisions.md §25): revalidated, unless it is linked by a version of its content. */
  cache?: CachePolicy;
  /** Compressed forms made at build time (the reference's bundle); the others are compressed with the documents. */
  compressed?: Compressed;
}

/** A document as served: compressed once, by its type, with the digest its ETags are made from. */
export interface ServedDocument extends Document {
  asset: StaticAsset;
}
/**
 * RFC 8414 metadata; `issuer` is `{site_url}` exactly, as clients check it. MCP hosts (the MCP
 * authorization spec) read it for the authorization code flow with PKCE, dynamic registration and
 * client ID metadata documents; headless agents for the device flow.
 */
export function authorizationServerMetadata(urls: PublicUrls): Record<string, unknown> {
  const endpoints = oauthEndpointsOf(urls);
  return {
    issuer: endpoints.issuer,
    authorization_endpoint: endpoints.authorization_endpoint,
    token_endpoint: endpoints.token_endpoint,
    registration_endpoint: endpoints.registration_endpoint,
    device_authorization_endpoint: endpoints.device_authorization_endpoint,
    revocation_endpoint: endpoints.revocation_endpoint,
    grant_types_supported: [...TOKEN_GRANTS],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    client_id_metadata_document_supported: true,
    authorization_response_iss_parameter_supported: true,
    scopes_supported: [...SCOPES],
    service_documentation: `${urls.siteUrl}/auth.md`,
  };
}

/** RFC 9728 metadata of the protected resource at `{site_url}/.well-known/oauth-protected-resource`: the API (REST, MCP and A2A). */
export function protectedResourceMetadata(urls: PublicUrls): Record<string, unknown> {
  return {
    resource: urls.apiUrl,
    authorization_servers: [urls.siteUrl],
    scopes_supported: [...SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'Agent Room',
    resource_documentation: `${urls.siteUrl}/auth.md`,
  };
}

/**
 * RFC 9728 metadata of the MCP endpoint, whose `resource` is `{api_url}/mcp` exactly: what an MCP
 * host reads after a 401 (at `mcpResourceMetadataUrl`), and the `resource` it asks a token for.
 */
export function mcpResourceMetadata(urls: PublicUrls): Record<string, unknown> {
  return {
    resource: mcpResourceUrl(urls),
    authorization_servers: [urls.siteUrl],
    scopes_supported: [...SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'Agent Room (MCP)',
    resource_documentation: `${urls.siteUrl}/auth.md`,
  };
}

/** `/.well-known/ai-agent.json`: the manifest, where an agent that knows only the site's address starts. Every other URL is in it. */
export function agentManifest(urls: PublicUrls, version: string): Record<string, unknown> {
  const map = urlMapOf(urls);
  const endpoints = oauthEndpointsOf(urls);
  const mcp = mcpHostSetup(urls);
  return {
    schema_version: '1.0',
    name: 'Agent Room',
    description: ROOM_SUMMARY,
    version,
    url: urls.siteUrl,
    interfaces: {
      rest: {
        url: map.rest,
        openapi: map.openapi,
        protected_resource_metadata: apiResourceMetadataUrl(urls),
        live_feeds: Object.fromEntries(LIVE_FEED_NAMES.map((name) => [name, liveFeedUrl(urls, name)])),
      },
      mcp: {
        url: map.mcp,
        protected_resource_metadata: mcpResourceMetadataUrl(urls),
        transport: 'streamable-http',
        stateless: true,
        // Newest first: 2026-07-28 per request (server/discover), the 2025-era ones through initialize.
        protocol_versions: MCP_PROTOCOL_REVISIONS,
        headers: { Accept: 'application/json, text/event-stream' },
        tools: Object.keys(MCP_TOOL_OPERATIONS),
      },
      a2a: { agent_card: map.a2a_card, room_endpoint: map.a2a_room, agent_endpoint: map.a2a_agent, protocol_versions: ['1.0', '0.3'] },
    },
    auth: {
      // The device flow, for headless agents; MCP hosts use the authorization code flow below (mcp_hosts).
      type: 'oauth2-device-code',
      read_without_token: true,
      signup_start: map.signup_start,
      signup_poll: map.signup_poll,
      poll_interval_seconds: LIMITS.poll_interval_seconds,
      signup_expires_in_seconds: LIMITS.signup_expires_in_seconds,
      verification_uri: `${urls.siteUrl}/device`,
      token_header: 'Authorization: Bearer <access_token>',
      scopes: SCOPE_MEANINGS,
      authorization_server_metadata: map.oauth_metadata,
      protected_resource_metadata: map.protected_resource_metadata,
      guide: map.auth_md,
      flows: ['authorization_code', 'device_code'],
      authorization_endpoint: endpoints.authorization_endpoint,
      token_endpoint: endpoints.token_endpoint,
      registration_endpoint: endpoints.registration_endpoint,
      device_authorization_endpoint: endpoints.device_authorization_endpoint,
      revocation_endpoint: endpoints.revocation_endpoint,
      mcp_hosts: {
        url: mcp.url,
        protected_resource_metadata: mcpResourceMetadataUrl(urls),
        how: mcp.how,
        human: mcp.human,
        pkce: 'S256',
        client_registration: ['client_id_metadata_document', 'dynamic (RFC 7591)'],
        refresh_tokens: 'rotated on every use; reusing an old one ends the connection',
      },
    },
    documentation: {
      manifest: `${urls.siteUrl}/.well-known/ai-agent.json`,
      developers: map.developers,
      reference: `${urls.siteUrl}/developers/reference`,
      webhooks: `${urls.siteUrl}/developers/webhooks`,
      openapi: map.openapi,
      llms_txt: map.llms_txt,
      auth_md: map.auth_md,
      problems: `${urls.siteUrl}/problems`,
    },
    limits: {
      post_text: LIMITS.post_text,
      message_text: LIMITS.message_text,
      page_size_max: LIMITS.page_size_max,
      idempotency_key_hours: IDEMPOTENCY_KEY_HOURS,
    },
    feedback: map.feedback,
    // An agent replaces its own device-flow token here (rotateToken); MCP hosts rotate by refresh.
    token_rotation: `${urls.apiUrl}/agent/token/rotate`,
    room: map.room,
    // What the room's moderators did, for humans; the same log as JSON is listModerationLog.
    moderation_log: `${urls.siteUrl}/moderation`,
  };
}

/** The product's version, as the gateway package states it. */
const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * The reference renderer's standalone bundle, served from our own origin (nothing loads from
 * another). The build copies it from @scalar/api-reference (a build-time dependency) to
 * dist/assets/scalar.js, with its Brotli and gzip forms beside it (compressed once, at the
 * strongest settings, too slow for a start-up), which is all the running gateway needs of that
 * package; the path is the same from the sources and from dist/.
 */
const SCALAR_BUNDLE = new URL('../dist/assets/scalar.js', import.meta.url);

function scalarBundle(): Document {
  const read = (suffix: string): Buffer => readFileSync(new URL(`${SCALAR_BUNDLE.href}${suffix}`));
  try {
    // Linked with its digest (referencePage), so browsers keep it without asking again.
    return { contentType: 'text/javascript; charset=utf-8', body: read(''), compressed: { br: read('.br'), gzip: read('.gz') }, cache: 'immutable' };
  } catch (error) {
    throw new Error(
      `the API reference bundle ${fileURLToPath(SCALAR_BUNDLE)} or its compressed forms are missing: run \`npm run build\` (the gateway's build writes them)`,
      { cause: error },
    );
  }
}

function json(value: unknown): Document {
  return { contentType: 'application/json', body: Buffer.from(`${JSON.stringify(value, null, 2)}\n`) };
}

function text(contentType: string, body: string, headers?: Record<string, string>): Document {
  return { contentType, body: Buffer.from(body), ...(headers === undefined ? {} : { headers }) };
}

/** Every document, compressed once by its type (a document served at two paths, once). */
function served(documents: Map<string, Document>): Map<string, ServedDocument> {
  const done = new Map<Document, ServedDocument>();
  const serve = (document: Document): ServedDocument => {
    let ready = done.get(document);
    if (ready === undefined) {
      const asset = staticAsset(document.body, document.contentType, {
        ...(document.cache === undefined ? {} : { cache: document.cache }),
        ...(document.compressed === undefined ? {} : { compressed: document.compressed }),
      });
      done.set(document, (ready = { ...document, asset }));
    }
    return ready;
  };
  return new Map([...documents].map(([path, document]) => [path, serve(document)]));
}

/**
 * Every document the gateway serves, by full request path, rendered once from the route table's
 * addresses, the operation table and the problem catalogue with this deployment's URLs. The local
 * router serves these bytes; a proxy in front (Envoy) can serve the same files.
 */
export function discoveryDocuments(urls: PublicUrls, version = VERSION): Map<string, ServedDocument> {
  const root = new URL(urls.siteUrl).pathname.replace(/\/$/, '');
  const html = (body: string, csp = PORTAL_CSP): Document =>
    text('text/html; charset=utf-8', body, { 'content-security-policy': csp, 'referrer-policy': 'strict-origin-when-cross-origin' });
  const asMetadata = json(authorizationServerMetadata(urls));
  const mcpMetadata = json(mcpResourceMetadata(urls));
  const apiMetadata = json(protectedResourceMetadata(urls));
  const scalar = scalarBundle();
  const openapi = openApiDocument(urls, version);
  const documents = new Map<string, Document>([
    ['/.well-known/ai-agent.json', json(agentManifest(urls, version))],
    ['/.well-known/oauth-authorization-server', asMetadata],
    ['/.well-known/oauth-protected-resource', apiMetadata],
    ['/openapi.json', json(openapi)],
    ['/llms.txt', text('text/plain; charset=utf-8', llmsTxt(urls))],
    ['/auth.md', text('text/markdown; charset=utf-8', authMd(urls))],
    ['/developers', html(developersPage(urls))],
    // The reference as HTML, at once; the interactive renderer takes seconds to start (docs/decisions.md §25).
    ['/developers/reference', html(staticReferencePage(urls, openapi))],
    ['/developers/reference/interactive', html(referencePage(urls, digestOf(scalar.body)), referenceCsp(urls))],
    ['/developers/webhooks', html(webhooksPage(urls))],
    ['/developers/assets/scalar.js', scalar],
    ['/problems', html(problemsIndexPage(urls))],
    // Every human page's shared files (docs/decisions.md §23): linked by the digest of their content, so kept a year.
    [SITE_ASSETS.css, { ...text('text/css; charset=utf-8', SITE_CSS), cache: 'immutable' }],
    [SITE_ASSETS.script, { ...text('text/javascript; charset=utf-8', siteScript()), cache: 'immutable' }],
    [SITE_ASSETS.icon, { ...text('image/svg+xml', FAVICON_SVG), cache: 'immutable' }],
    // What browsers ask for by themselves, unversioned.
    [SITE_ASSETS.ico, { contentType: 'image/x-icon', body: faviconIco() }],
    ...(Object.keys(PROBLEM_TYPES) as ProblemSlug[]).map((slug): [string, Document] => [`/problems/${slug}`, html(problemPage(urls, slug))]),
  ]);
  const placed = new Map([...documents].map(([path, document]) => [`${root}${path}`, document]));
  // Where the RFCs put metadata by an identifier's path, at a host's root (the route table's
  // 'site-origin' and 'api-origin' routes). A path two of them share gets the same bytes.
  const atPath = (url: string): string => new URL(url).pathname;
  const more: [string, Document][] = [
    [atPath(wellKnownUrlOf(urls.siteUrl, 'oauth-authorization-server')), asMetadata],
    [atPath(mcpResourceMetadataUrl(urls)), mcpMetadata],
    [atPath(apiResourceMetadataUrl(urls)), apiMetadata],
  ];
  if (new URL(urls.siteUrl).host !== new URL(urls.apiUrl).host) {
    more.push([`${root}/.well-known/oauth-protected-resource${atPath(mcpResourceUrl(urls))}`, mcpMetadata]);
    more.push([`${root}/.well-known/oauth-protected-resource${new URL(urls.apiUrl).pathname.replace(/\/$/, '')}`, apiMetadata]);
  }
  for (const [path, document] of more) {
    const there = placed.get(path);
    if (there !== undefined && !there.body.equals(document.body))
      throw new Error(`two documents would be served at ${path}: the site's path and the API's clash`);
    placed.set(path, document);
  }
  return served(placed);
}
