import type { Server } from 'node:http';
import {
  apiResourceMetadataUrl,
  LIVE_FEED_NAMES,
  LIVE_FEEDS,
  type LiveFeedSpec,
  liveFeedUrl,
  mcpResourceMetadataUrl,
  mcpResourceUrl,
  TOKEN_GRANTS,
  wellKnownUrlOf,
} from '@agentroom/api';
import type { PublicUrls } from '@agentroom/kit/config';
import { SCOPES } from '@agentroom/kit/domain';
import { freePort } from '@agentroom/kit/local';
import { createLogger } from '@agentroom/kit/log';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { discoveryDocuments } from '../src/discovery.js';
import { documentFileNames } from '../src/document-files.js';
import { mcpHostSetup } from '../src/guides.js';
import { startRouter, type Target } from '../src/router.js';
import { matchRoute, resolveRoutes } from '../src/routes.js';

const LAYOUTS: Record<string, PublicUrls> = {
  'one origin': { siteUrl: 'http://localhost:8080', apiUrl: 'http://localhost:8080/api', baseUrl: 'http://localhost:8080/api/v1' },
  'a site with a path': { siteUrl: 'https://agents.test/room', apiUrl: 'https://agents.test/room/api', baseUrl: 'https://agents.test/room/api/v1' },
  'two hosts': { siteUrl: 'https://room.example', apiUrl: 'https://api.room.example', baseUrl: 'https://api.room.example/v1' },
  'two hosts, both with a path': {
    siteUrl: 'https://example.org/room',
    apiUrl: 'https://api.example.org/agents',
    baseUrl: 'https://api.example.org/agents/v1',
  },
};

function jsonAt(documents: Map<string, { body: Buffer }>, path: string): Record<string, unknown> {
  const document = documents.get(path);
  if (document === undefined) throw new Error(`no document at ${path} among ${[...documents.keys()].filter((key) => key.includes('well-known')).join(', ')}`);
  return JSON.parse(document.body.toString('utf8')) as Record<string, unknown>;
}

describe('the OAuth metadata documents', () => {
  it.each(Object.entries(LAYOUTS))('%s: RFC 8414 metadata names every endpoint of both flows, at both locations', (_name, urls) => {
    const documents = discoveryDocuments(urls);
    const root = new URL(urls.siteUrl).pathname.replace(/\/$/, '');
    const metadata = jsonAt(documents, `${root}/.well-known/oauth-authorization-server`);
    expect(metadata).toEqual({
      issuer: urls.siteUrl,
      authorization_endpoint: `${urls.siteUrl}/authorize`,
      token_endpoint: `${urls.apiUrl}/oauth/token`,
      registration_endpoint: `${urls.apiUrl}/oauth/register`,
      device_authorization_endpoint: `${urls.apiUrl}/oauth/device_authorization`,
      revocation_endpoint: `${urls.apiUrl}/oauth/revoke`,
      grant_types_supported: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'],
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      client_id_metadata_document_supported: true,
      authorization_response_iss_parameter_supported: true,
      scopes_supported: [...SCOPES],
      service_documentation: `${urls.siteUrl}/auth.md`,
    });
    expect(metadata.grant_types_supported).toEqual([...TOKEN_GRANTS]);
    // RFC 8414 §3.1: for an issuer with a path, the well-known segment goes before the path.
    const inserted = new URL(wellKnownUrlOf(urls.siteUrl, 'oauth-authorization-server')).pathname;
    expect(inserted).toBe(`/.well-known/oauth-authorization-server${root}`);
    expect(documents.get(inserted)?.body.equals(documents.get(`${root}/.well-known/oauth-authorization-server`)!.body)).toBe(true);
  });

  it.each(Object.entries(LAYOUTS))("%s: RFC 9728 metadata of MCP names {api_url}/mcp exactly, where the challenge's URL points", (_name, urls) => {
    const documents = discoveryDocuments(urls);
    const url = new URL(mcpResourceMetadataUrl(urls));
    expect(url.origin).toBe(new URL(urls.apiUrl).origin);
    expect(url.pathname).toBe(`/.well-known/oauth-protected-resource${new URL(urls.apiUrl).pathname.replace(/\/$/, '')}/mcp`);
    expect(jsonAt(documents, url.pathname)).toEqual({
      resource: `${urls.apiUrl}/mcp`,
      authorization_servers: [urls.siteUrl],
      scopes_supported: [...SCOPES],
      bearer_methods_supported: ['header'],
      resource_name: 'Agent Room (MCP)',
      resource_documentation: `${urls.siteUrl}/auth.md`,
    });
    expect(mcpResourceUrl(urls)).toBe(`${urls.apiUrl}/mcp`);
    // The API's own metadata stays where it was, as it was.
    const root = new URL(urls.siteUrl).pathname.replace(/\/$/, '');
    expect(jsonAt(documents, `${root}/.well-known/oauth-protected-resource`)).toMatchObject({ resource: urls.apiUrl, authorization_servers: [urls.siteUrl] });
    // And where RFC 9728 §3.1 puts it for the resource {api_url}, on the API's host: what REST's challenges name.
    const api = new URL(apiResourceMetadataUrl(urls));
    expect(api.origin).toBe(new URL(urls.apiUrl).origin);
    expect(api.pathname).toBe(`/.well-known/oauth-protected-resource${new URL(urls.apiUrl).pathname.replace(/\/$/, '')}`);
    expect(jsonAt(documents, api.pathname)).toMatchObject({ resource: urls.apiUrl, authorization_servers: [urls.siteUrl] });
    expect(matchRoute(resolveRoutes(urls), api.host, api.pathname)?.upstream).toBe('gateway');
  });

  it('the default deployment serves the MCP metadata at /.well-known/oauth-protected-resource/api/mcp', () => {
    expect(mcpResourceMetadataUrl(LAYOUTS['one origin']!)).toBe('http://localhost:8080/.well-known/oauth-protected-resource/api/mcp');
  });

  it("two hosts: the site's host serves the MCP metadata too, below the site's path", () => {
    const urls = LAYOUTS['two hosts, both with a path']!;
    const documents = discoveryDocuments(urls);
    const routes = resolveRoutes(urls);
    expect(jsonAt(documents, '/room/.well-known/oauth-protected-resource/agents/mcp').resource).toBe('https://api.example.org/agents/mcp');
    expect(matchRoute(routes, 'example.org', '/room/.well-known/oauth-protected-resource/agents/mcp')?.upstream).toBe('gateway');
    expect(matchRoute(routes, 'api.example.org', '/.well-known/oauth-protected-resource/agents/mcp')?.upstream).toBe('gateway');
  });

  it.each(Object.entries(LAYOUTS))('%s: every exact gateway route has its document, every document a route, and each its own file', (_name, urls) => {
    const documents = discoveryDocuments(urls);
    const routes = resolveRoutes(urls);
    for (const route of routes.filter((candidate) => candidate.upstream === 'gateway' && candidate.match === 'exact')) {
      expect(documents.has(route.path), `${route.what} (${route.path})`).toBe(true);
    }
    const hosts = [...new Set(routes.map((route) => route.host))];
    for (const path of documents.keys()) {
      expect(
        hosts.some((host) => matchRoute(routes, host, path)?.upstream === 'gateway'),
        path,
      ).toBe(true);
    }
    const names = documentFileNames(urls, documents.keys());
    expect(new Set(names.values()).size).toBe(documents.size);
  });
});

describe('the manifest and the guides', () => {
  const urls = LAYOUTS['one origin']!;
  const documents = discoveryDocuments(urls);
  const text = (path: string): string => documents.get(path)!.body.toString('utf8');

  it('the manifest keeps the device flow and adds the authorization code facts MCP hosts need', () => {
    const manifest = jsonAt(documents, '/.well-known/ai-agent.json') as { auth: Record<string, unknown>; interfaces: { mcp: Record<string, unknown> } };
    expect(manifest.auth).toMatchObject({
      type: 'oauth2-device-code',
      read_without_token: true,
      signup_start: `${urls.apiUrl}/agent/signup/start`,
      signup_poll: `${urls.apiUrl}/agent/signup/poll`,
      verification_uri: `${urls.siteUrl}/device`,
      authorization_server_metadata: `${urls.siteUrl}/.well-known/oauth-authorization-server`,
      protected_resource_metadata: `${urls.siteUrl}/.well-known/oauth-protected-resource`,
      authorization_endpoint: `${urls.siteUrl}/authorize`,
      registration_endpoint: `${urls.apiUrl}/oauth/register`,
      mcp_hosts: {
        url: `${urls.apiUrl}/mcp`,
        protected_resource_metadata: 'http://localhost:8080/.well-known/oauth-protected-resource/api/mcp',
        how: expect.stringContaining('PKCE'),
      },
    });
    expect(manifest.interfaces.mcp).toMatchObject({
      url: `${urls.apiUrl}/mcp`,
      protected_resource_metadata: 'http://localhost:8080/.well-known/oauth-protected-resource/api/mcp',
    });
  });

  it("auth.md, llms.txt and the portal show the one URL, what the human sees, and each host's configuration", () => {
    const setup = mcpHostSetup(urls);
    expect(setup.configs.map((config) => config.lines)).toEqual([
      'claude mcp add --transport http agent-room http://localhost:8080/api/mcp',
      '{"servers":{"agent-room":{"type":"http","url":"http://localhost:8080/api/mcp"}}}',
      '{"mcpServers":{"agent-room":{"url":"http://localhost:8080/api/mcp"}}}',
      'Add custom connector, then paste http://localhost:8080/api/mcp',
    ]);
    const escaped = (value: string): string =>
      value.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll("'", '&#39;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
    for (const [path, encode] of [
      ['/auth.md', (value: string) => value],
      ['/llms.txt', (value: string) => value],
      ['/developers', escaped],
    ] as const) {
      const body = text(path);
      expect(body, path).toContain('Connect an MCP host');
      for (const config of setup.configs) expect(body, `${path}: ${config.host}`).toContain(encode(config.lines));
      expect(body, path).toContain('/mcp inside Claude Code');
      expect(body, path).toContain(`${urls.siteUrl}/account`);
      expect(body, path).toContain('Approve or Decline');
      // The device flow stays, for headless agents.
      expect(body, path).toContain(`${urls.apiUrl}/agent/signup/start`);
    }
    expect(text('/auth.md')).toContain(`resource_metadata="${mcpResourceMetadataUrl(urls)}", scope="posts:write"`);
    expect(text('/auth.md')).toContain(`POST ${urls.apiUrl}/oauth/register`);
  });

  it('the OpenAPI document shows the three grants, registration, and revocation of refresh tokens', () => {
    const openapi = jsonAt(documents, '/openapi.json') as {
      paths: Record<
        string,
        Record<
          string,
          {
            responses: Record<string, { content?: Record<string, unknown> }>;
            requestBody: { content: Record<string, { schema: { properties: Record<string, { enum?: string[] }> } }> };
          }
        >
      >;
    };
    const token = openapi.paths['/oauth/token']!.post!;
    expect(Object.keys(token.responses).sort()).toEqual(['200', '400', '401', '413', '429', '503']);
    // One form per grant, each with the fields that grant needs.
    const grants = (
      token.requestBody.content['application/x-www-form-urlencoded']!.schema as unknown as {
        oneOf: { properties: Record<string, { enum?: string[] }>; required: string[] }[];
      }
    ).oneOf;
    expect(grants.flatMap((grant) => grant.properties.grant_type!.enum)).toEqual([...TOKEN_GRANTS]);
    expect(grants.map((grant) => grant.required.sort())).toEqual([
      ['code', 'code_verifier', 'grant_type'],
      ['grant_type', 'refresh_token'],
      ['device_code', 'grant_type'],
    ]);
    expect(grants.flatMap((grant) => Object.keys(grant.properties))).toEqual(
      expect.arrayContaining(['code', 'code_verifier', 'redirect_uri', 'refresh_token', 'resource', 'device_code', 'client_id']),
    );
    const register = openapi.paths['/oauth/register']!.post!;
    expect(Object.keys(register.responses).sort()).toEqual(['201', '400', '413', '415', '429', '503']);
    expect(Object.keys(register.requestBody.content)).toEqual(['application/json']);
    expect(Object.keys(register.responses['400']!.content!)).toEqual(['application/json', 'application/problem+json']);
    const revoke = openapi.paths['/oauth/revoke']!.post!;
    // A hint only: any value is taken, and ignored when it is not access_token or refresh_token.
    expect(revoke.requestBody.content['application/x-www-form-urlencoded']!.schema.properties.token_type_hint).toMatchObject({ type: 'string', maxLength: 50 });
  });
});

describe('the live feeds, read off their rows', () => {
  it.each(Object.entries(LAYOUTS))(
    '%s: the manifest, the OpenAPI document, llms.txt and the portal name every feed of LIVE_FEEDS, with its scope',
    (_name, urls) => {
      const documents = discoveryDocuments(urls);
      const root = new URL(urls.siteUrl).pathname.replace(/\/$/, '');
      const text = (path: string): string => documents.get(`${root}${path}`)!.body.toString('utf8');
      const manifest = jsonAt(documents, `${root}/.well-known/ai-agent.json`) as { interfaces: { rest: { live_feeds: Record<string, string> } } };
      expect(manifest.interfaces.rest.live_feeds).toEqual(Object.fromEntries(LIVE_FEED_NAMES.map((name) => [name, liveFeedUrl(urls, name)])));
      const openapi = jsonAt(documents, `${root}/openapi.json`) as {
        paths: Record<string, Record<string, { operationId: string; security: Record<string, string[]>[]; responses: Record<string, unknown> }>>;
      };
      const streams = Object.entries(openapi.paths).flatMap(([path, methods]) =>
        Object.values(methods)
          .filter((operation) => 'text/event-stream' in ((operation.responses['200'] as { content?: object } | undefined)?.content ?? {}))
          .map((operation) => ({ path, operation })),
      );
      expect(streams.map(({ operation }) => operation.operationId)).toEqual(LIVE_FEED_NAMES.map((name) => LIVE_FEEDS[name].operation));
      for (const name of LIVE_FEED_NAMES) {
        const feed: LiveFeedSpec = LIVE_FEEDS[name];
        const url = liveFeedUrl(urls, name);
        const also = feed.also === undefined ? '' : feed.also.event;
        const stream = streams.find(({ operation }) => operation.operationId === feed.operation)!;
        expect(`${urls.apiUrl}${stream.path}`, feed.operation).toBe(url);
        expect(stream.operation.security, feed.operation).toEqual(feed.scope === undefined ? [{}, { bearer: [] }] : [{ bearer: [feed.scope] }]);
        expect(text('/llms.txt'), `llms.txt names ${url}`).toContain(
          `- \`GET ${url}\`: ${feed.title} (${feed.scope === undefined ? 'no token' : `scope ${feed.scope}`}), events named \`${feed.event}\`${also === '' ? '' : ` and \`${also}\``}`,
        );
        expect(text('/developers'), `the portal names ${url}`).toContain(
          `<tr><td><code>GET ${url}</code></td><td>${feed.title}</td><td><code>${feed.event}</code>${also === '' ? '' : `, <code>${also}</code>`}</td><td>${feed.scope === undefined ? 'none' : `<code>${feed.scope}</code>`}</td></tr>`,
        );
      }
    },
  );
});

describe('the router serves the metadata where each RFC puts it, for a site below a path', () => {
  let server: Server;
  let origin: string;
  let urls: PublicUrls;

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    urls = { siteUrl: `${origin}/room`, apiUrl: `${origin}/room/api`, baseUrl: `${origin}/room/api/v1` };
    // Stand-ins for edge and auth: a 404 that says who answered.
    const standIn = (name: string): Target => ({
      kind: 'local',
      handler: (_req, res) => {
        res.writeHead(404, { 'x-upstream': name });
        res.end();
      },
    });
    ({ server } = await startRouter({
      routes: resolveRoutes(urls),
      targets: { edge: standIn('edge'), auth: standIn('auth') },
      documents: discoveryDocuments(urls),
      log: createLogger('test', 'silent'),
      port,
      host: '127.0.0.1',
    }));
  });

  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('RFC 8414 metadata at {site_url}/.well-known/… and at /.well-known/oauth-authorization-server/room, the same document', async () => {
    const kept = await fetch(`${origin}/room/.well-known/oauth-authorization-server`);
    const inserted = await fetch(`${origin}/.well-known/oauth-authorization-server/room`);
    expect([kept.status, inserted.status]).toEqual([200, 200]);
    expect(inserted.headers.get('content-type')).toBe('application/json');
    const body = (await inserted.json()) as Record<string, unknown>;
    expect(body).toEqual(await kept.json());
    expect(body).toMatchObject({ issuer: `${origin}/room`, authorization_endpoint: `${origin}/room/authorize`, code_challenge_methods_supported: ['S256'] });
    // Not at the host's root without the path: that would be another issuer's (edge answers the 404).
    expect((await fetch(`${origin}/.well-known/oauth-authorization-server`)).headers.get('x-upstream')).toBe('edge');
  });

  it('RFC 9728 metadata of MCP at /.well-known/oauth-protected-resource/room/api/mcp', async () => {
    const response = await fetch(mcpResourceMetadataUrl(urls));
    expect(mcpResourceMetadataUrl(urls)).toBe(`${origin}/.well-known/oauth-protected-resource/room/api/mcp`);
    expect(response.status).toBe(200);
    expect(((await response.json()) as { resource: string }).resource).toBe(`${origin}/room/api/mcp`);
  });

  it('the authorization endpoint goes to auth', async () => {
    expect((await fetch(`${origin}/room/authorize?response_type=code`)).headers.get('x-upstream')).toBe('auth');
    expect(
      (
        await fetch(`${origin}/room/authorize`, { method: 'POST', body: 'decision=approve', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
      ).headers.get('x-upstream'),
    ).toBe('auth');
    expect((await fetch(`${origin}/authorize`)).headers.get('x-upstream')).toBe('edge');
  });
});
