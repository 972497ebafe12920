import { execFile } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { apiResourceMetadataUrl, mcpResourceMetadataUrl } from '@agentroom/api';
import { SCOPES } from '@agentroom/kit/domain';
import { freePort } from '@agentroom/kit/local';
import { PROBLEM_TYPES } from '@agentroom/kit/problems';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { discoveryDocuments } from '@agentroom/gateway';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { resolveRoutes } from '@agentroom/gateway';
import { launchChromium } from '../support/browser.js';
import { checked } from '../support/openapi-check.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));

/** What a discovery URL must answer with, by how it ends. */
function expectedType(url: string): RegExp {
  if (url.endsWith('.json') || url.includes('/.well-known/')) return /^application\/json/;
  if (url.endsWith('.txt')) return /^text\/plain/;
  if (url.endsWith('.md')) return /^text\/markdown/;
  if (url.endsWith('.css')) return /^text\/css/;
  if (url.endsWith('.js')) return /^text\/javascript/;
  if (url.endsWith('.svg')) return /^image\/svg\+xml/;
  if (url.endsWith('.ico')) return /^image\/x-icon/;
  return /^text\/html/;
}

/** Every absolute URL inside a JSON value. */
function urlsIn(value: unknown, into: Set<string> = new Set()): Set<string> {
  if (typeof value === 'string' && /^https?:\/\//.test(value)) into.add(value);
  else if (Array.isArray(value)) for (const item of value) urlsIn(item, into);
  else if (typeof value === 'object' && value !== null) for (const item of Object.values(value)) urlsIn(item, into);
  return into;
}

/** The links of an HTML page or a markdown/text document, made absolute. */
function linksIn(body: string, base: string): string[] {
  const found = [...body.matchAll(/href="([^"]+)"/g), ...body.matchAll(/\]\((https?:\/\/[^)\s]+)\)/g)].map((m) => m[1] as string);
  return found.map((link) => new URL(link.replaceAll('&amp;', '&'), base).href);
}

describe('discovery: from the site address to everything else', () => {
  let app: Embedded;
  let site: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    site = app.urls.siteUrl;
  });

  afterAll(async () => {
    await app.stop();
  });

  it('follows every link of the manifest, the OAuth metadata, the guides and the portal: documents answer 200 with their type, endpoints exist', async () => {
    const manifest = (await (await fetch(`${site}/.well-known/ai-agent.json`)).json()) as Record<string, unknown>;
    const endpoints = new Set<string>();
    const queue = [
      ...urlsIn(manifest),
      `${site}/.well-known/oauth-authorization-server`,
      `${site}/.well-known/oauth-protected-resource`,
      mcpResourceMetadataUrl(app.urls),
    ];
    const seen = new Set<string>();
    // The authorization endpoint is a page for humans that needs a client's request: checked below, not crawled.
    const authorize = `${site}/authorize`;
    while (queue.length > 0) {
      const url = queue.shift() as string;
      if (seen.has(url)) continue;
      seen.add(url);
      if (url === authorize) continue;
      const { pathname } = new URL(url);
      // API endpoints are called, not crawled: below they are checked against the OpenAPI document.
      if (url.startsWith(app.urls.apiUrl) || url.includes('<')) {
        endpoints.add(url);
        continue;
      }
      const response = await fetch(url);
      expect(response.status, url).toBe(200);
      expect(response.headers.get('content-type'), url).toMatch(expectedType(pathname));
      if (/\.(js|css|svg|ico)$/.test(pathname)) continue;
      const body = await response.text();
      const next = expectedType(pathname).source.includes('json') ? [...urlsIn(JSON.parse(body))] : linksIn(body, url);
      for (const link of next) if (link.startsWith(site) && !link.includes('#')) queue.push(link);
    }
    // The crawl reached every kind of document.
    for (const path of [
      '/openapi.json',
      '/llms.txt',
      '/auth.md',
      '/developers',
      '/developers/reference',
      '/developers/reference/interactive',
      '/problems',
      '/problems/scope-required',
      '/.well-known/agent-card.json',
      '/.well-known/oauth-protected-resource/api/mcp',
      '/authorize',
    ]) {
      expect(seen, path).toContain(`${site}${path}`);
    }
    // The pages' shared files, linked from every page with their version.
    for (const path of ['/assets/site.css', '/favicon.svg'])
      expect(
        [...seen].some((url) => url.startsWith(`${site}${path}?v=`)),
        path,
      ).toBe(true);
    // The authorization endpoint is auth's page (HTML), not edge's 404 problem, even asked without a client.
    const page = await fetch(authorize, { headers: { accept: 'text/html' } });
    expect(page.status, authorize).not.toBe(404);
    expect(page.headers.get('content-type'), authorize).toMatch(/^text\/html/);
    for (const slug of Object.keys(PROBLEM_TYPES)) expect(seen).toContain(`${site}/problems/${slug}`);

    // Every endpoint the manifest names answers on its documented method (none is a 404).
    const openapi = (await (await fetch(`${site}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const documented = Object.keys(openapi.paths).map((path) => `${app.urls.apiUrl}${path}`);
    for (const url of endpoints) {
      if (url.includes('<')) continue;
      // The API's own address names the protected resource (RFC 9728); the base is the REST root.
      const viaOpenApi = documented.includes(url) || url === app.urls.baseUrl || url === app.urls.apiUrl;
      const isProtocol = url === `${app.urls.apiUrl}/mcp` || url === `${app.urls.apiUrl}/a2a`;
      expect(viaOpenApi || isProtocol, `${url} is in /openapi.json or is the MCP or A2A endpoint`).toBe(true);
    }
    const mcp = await fetch(`${app.urls.apiUrl}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(mcp.status).toBe(200);
  });

  it('maps every route of the route table in the manifest, or keeps it private on purpose', async () => {
    const manifest = JSON.stringify(await (await fetch(`${site}/.well-known/ai-agent.json`)).json());
    // Human pages and the human step of the signup are reached from links a human follows, not by agents;
    // assets are loaded by the pages that need them; OAuth endpoints are in the OAuth metadata.
    const PRIVATE = new Set([
      '/signin',
      '/signout',
      '/device',
      '/account',
      '/account/revoke',
      // The moderators' queue: for the humans an operator made moderators.
      '/moderation/',
      '/account/agent',
      '/assets/',
      '/assets/site.css',
      '/assets/site.js',
      '/favicon.svg',
      '/favicon.ico',
      '/api/agent/signup/complete',
      '/api/oauth/',
      '/developers/',
      '/problems/',
      '/api/a2a/',
    ]);
    const resolved = resolveRoutes(app.urls);
    for (const route of resolved) {
      const url = `${site}${route.path}`;
      const listed = manifest.includes(`"${url}"`) || manifest.includes(`"${url.replace(/\/$/, '')}"`);
      expect(listed || PRIVATE.has(route.path), `${route.what} (${route.path})`).toBe(true);
    }
    expect((await fetch(`${site}/.well-known/oauth-authorization-server`).then((r) => r.json())) as Record<string, unknown>).toMatchObject({
      issuer: site,
      authorization_endpoint: `${site}/authorize`,
      registration_endpoint: `${app.urls.apiUrl}/oauth/register`,
      device_authorization_endpoint: `${app.urls.apiUrl}/oauth/device_authorization`,
      grant_types_supported: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'],
      code_challenge_methods_supported: ['S256'],
      client_id_metadata_document_supported: true,
    });
  });

  it("serves the MCP endpoint's protected resource metadata where RFC 9728 puts it, the URL its 401 challenge names", async () => {
    const url = mcpResourceMetadataUrl(app.urls);
    expect(url).toBe(`${new URL(site).origin}/.well-known/oauth-protected-resource/api/mcp`);
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    expect(await response.json()).toEqual({
      resource: `${app.urls.apiUrl}/mcp`,
      authorization_servers: [site],
      scopes_supported: [...SCOPES],
      bearer_methods_supported: ['header'],
      resource_name: 'Agent Room (MCP)',
      resource_documentation: `${site}/auth.md`,
    });
    // A token tool called without a token: 401, naming that URL and the tool's scope.
    const call = await fetch(`${app.urls.apiUrl}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'room_post', arguments: { text: 'hello' } } }),
    });
    expect(call.status).toBe(401);
    expect(call.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${url}", scope="posts:write"`);
    // The problem's page says so, rather than a tool result.
    const problem = ((await call.json()) as { error: { data: { type: string } } }).error.data;
    const page = await (await fetch(problem.type)).text();
    expect(page).toContain('Over MCP a tool that needs a token answers it as HTTP 401 with <code>WWW-Authenticate</code>');
    expect(page).not.toContain('tool result with <code>isError: true</code>');
  });

  it('answers a browser that follows a wrong link with a page, and an API client with the problem', async () => {
    const page = await fetch(`${site}/no-such-page`, { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
    expect(page.status).toBe(404);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toContain(`href="${site}/developers"`);
    expect(html).toContain(`href="${site}/"`);
    // In the look of every other page: the shared stylesheet and icon, which its policy allows.
    expect(html).toMatch(new RegExp(`<link rel="stylesheet" href="${site}/assets/site\\.css\\?v=[\\w-]+">`));
    expect(html).toMatch(new RegExp(`<link rel="icon" href="${site}/favicon\\.svg\\?v=[\\w-]+" type="image/svg\\+xml">`));
    expect(page.headers.get('content-security-policy')).toContain("style-src 'self'");
    const api = await fetch(`${site}/no-such-page`);
    expect(api.status).toBe(404);
    expect(api.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(((await api.json()) as { remedy: string }).remedy).toContain(`${site}/.well-known/ai-agent.json`);
    // An unknown problem slug is a plain 404 too.
    expect((await fetch(`${site}/problems/no-such-problem`)).status).toBe(404);
  });

  it('passes @redocly/cli lint with no errors, and checks the HTTP tests answers against it', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'openapi-'));
    const file = join(folder, 'openapi.json');
    await writeFile(file, await (await fetch(`${site}/openapi.json`)).text());
    const bin = join(root, 'node_modules/.bin/redocly');
    const { stdout, stderr } = await run(bin, ['lint', file, '--config', join(root, 'redocly.yaml'), '--format', 'stylish'], { cwd: root });
    expect(`${stdout}${stderr}`).toMatch(/valid/i);
    expect(`${stdout}${stderr}`).not.toMatch(/error/i);
    // The answer checker (support/openapi-check.ts) sees documented operations through fetch.
    const before = checked.count;
    await fetch(`${app.urls.baseUrl}/posts?limit=2`);
    expect(checked.count).toBe(before + 1);
  });
});

describe('discovery documents follow the deployment addresses', () => {
  const one = { siteUrl: 'https://room.example.org', apiUrl: 'https://api.example.org', baseUrl: 'https://api.example.org/v1' };
  const two = { siteUrl: 'https://agents.test/room', apiUrl: 'https://agents.test/room/api', baseUrl: 'https://agents.test/room/api/v1' };

  it('renders every document with the configured hosts, and no other', () => {
    for (const urls of [one, two]) {
      const documents = discoveryDocuments(urls);
      const rootPath = new URL(urls.siteUrl).pathname.replace(/\/$/, '');
      expect([...documents.keys()]).toContain(`${rootPath}/.well-known/ai-agent.json`);
      for (const [path, document] of documents) {
        // Code and images: the pages' script and stylesheet, the icon (its SVG namespace is a URL).
        if (/\.(js|css|svg|ico)$/.test(path)) continue;
        const body = document.body.toString('utf8');
        const hosts = new Set([...body.matchAll(/https?:\/\/([a-z0-9.-]+(?::\d+)?)/gi)].map((m) => m[1] as string));
        for (const host of hosts) {
          // Besides the deployment: only standards' own URLs (json-schema.org) and the licence's.
          expect([new URL(urls.siteUrl).host, new URL(urls.apiUrl).host, 'json-schema.org', 'www.apache.org'], `${host} in ${path}`).toContain(host);
        }
      }
      const manifest = JSON.parse(documents.get(`${rootPath}/.well-known/ai-agent.json`)?.body.toString('utf8') ?? '{}') as {
        interfaces: { mcp: { url: string }; rest: { url: string } };
      };
      expect(manifest.interfaces.mcp.url).toBe(`${urls.apiUrl}/mcp`);
      expect(manifest.interfaces.rest.url).toBe(urls.baseUrl);
    }
  });

  it('serves each host its own documents when site and API live on two hosts', async () => {
    const port = await freePort();
    const app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(port),
      SITE_URL: `http://room.test:${port}`,
      API_URL: `http://api.test:${port}`,
    });
    try {
      const get = (host: string, path: string) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = httpRequest({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (body += chunk));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          });
          req.on('error', reject);
          req.end();
        });
      const manifest = await get(`room.test:${port}`, '/.well-known/ai-agent.json');
      expect(manifest.status).toBe(200);
      expect(JSON.parse(manifest.body)).toMatchObject({ interfaces: { mcp: { url: `http://api.test:${port}/mcp` } } });
      const openapi = JSON.parse((await get(`room.test:${port}`, '/openapi.json')).body) as { servers: { url: string }[] };
      expect(openapi.servers[0]?.url).toBe(`http://api.test:${port}`);
      // The API host serves the API, not the site's documents.
      expect((await get(`api.test:${port}`, '/v1/posts')).status).toBe(200);
      expect((await get(`api.test:${port}`, '/.well-known/ai-agent.json')).status).toBe(404);
      // MCP's protected resource metadata: on the API's host where RFC 9728 puts it, and on the site's host.
      expect(mcpResourceMetadataUrl(app.urls)).toBe(`http://api.test:${port}/.well-known/oauth-protected-resource/mcp`);
      for (const host of [`api.test:${port}`, `room.test:${port}`]) {
        const metadata = await get(host, '/.well-known/oauth-protected-resource/mcp');
        expect(metadata.status, host).toBe(200);
        expect(JSON.parse(metadata.body), host).toMatchObject({ resource: `http://api.test:${port}/mcp`, authorization_servers: [`http://room.test:${port}`] });
      }
      // The API's own, at its host's root since {api_url} has no path (RFC 9728 §3.1): what REST's challenges name.
      expect(apiResourceMetadataUrl(app.urls)).toBe(`http://api.test:${port}/.well-known/oauth-protected-resource`);
      const api = await get(`api.test:${port}`, '/.well-known/oauth-protected-resource');
      expect(api.status).toBe(200);
      expect(JSON.parse(api.body)).toMatchObject({ resource: `http://api.test:${port}`, authorization_servers: [`http://room.test:${port}`] });
    } finally {
      await app.stop();
    }
  });
});

describe('the portal in a real browser', () => {
  let app: Embedded;
  let browser: Browser;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser.close();
    await app.stop();
  });

  it.each(['/developers', '/developers/reference', '/developers/reference/interactive', '/developers/webhooks', '/problems/scope-required', '/problems'])(
    'loads %s with no console error and no request to another origin',
    async (path) => {
      const page = await browser.newPage();
      const errors: string[] = [];
      const foreign: string[] = [];
      const origin = new URL(app.urls.siteUrl).origin;
      page.on('console', (message) => {
        if (message.type() === 'error') errors.push(message.text());
      });
      page.on('pageerror', (error) => errors.push(error.message));
      page.on('request', (request) => {
        const url = request.url();
        if (!url.startsWith(origin) && !url.startsWith('data:') && !url.startsWith('blob:')) foreign.push(url);
      });
      const failed: string[] = [];
      page.on('requestfailed', (request) => failed.push(`${request.url()} ${request.failure()?.errorText ?? ''}`));
      page.on('response', (answer) => {
        if (answer.status() >= 400) failed.push(`${answer.url()} ${answer.status()}`);
      });
      const response = await page.goto(`${app.urls.siteUrl}${path}`, { waitUntil: 'networkidle' });
      expect(response?.status()).toBe(200);
      if (path.startsWith('/developers/reference')) {
        // Both references show the operations: the plain one in its HTML, the interactive one once its renderer read /openapi.json.
        await page
          .locator(path.endsWith('/interactive') ? 'h3.section-header-label' : 'section.operation h3')
          .first()
          .waitFor({ timeout: 15_000 });
        await page.getByText('Post to the room').first().waitFor({ timeout: 15_000 });
        expect(failed).toEqual([]);
      } else {
        expect(await page.locator('h1').first().textContent()).toBeTruthy();
      }
      expect(errors).toEqual([]);
      expect(foreign).toEqual([]);
      await page.close();
    },
  );

  it("opens a problem's page from the type URL of a real answer", async () => {
    const answer = (await (
      await fetch(`${app.urls.baseUrl}/posts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"text":"hi"}' })
    ).json()) as { type: string; title: string };
    const page = await browser.newPage();
    const response = await page.goto(answer.type);
    expect(response?.status()).toBe(200);
    expect(await page.locator('h1').textContent()).toBe(answer.title);
    await page.close();
  });
});
