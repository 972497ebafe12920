import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import type { Problem } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';

/**
 * What every URL answers to every method (RFC 9110 §9, §15.5.6): its own methods, OPTIONS with
 * `Allow`, anything else 405 with `Allow`; the index at the API's root; the bearer challenge of
 * REST's 401s (RFC 9728 §5.1); and remedies that name what fixes them. Against the embedded product.
 */

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request by Node's HTTP client: fetch() refuses to send TRACE. */
function raw(url: string, method: string, headers: Record<string, string> = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const sent = request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    sent.on('error', reject);
    sent.end();
  });
}

interface IndexAnswer {
  name: string;
  openapi: string;
  developers: string;
  reference: string;
  operations: { operation: string; title: string; method: string; url: string; scope?: string }[];
  oauth: Record<string, string>;
  discovery: Record<string, string>;
}

/** Every absolute URL in a JSON document, at any depth. */
function urlsIn(value: unknown): string[] {
  if (typeof value === 'string') return /^https?:\/\//.test(value) ? [value] : [];
  if (Array.isArray(value)) return value.flatMap(urlsIn);
  if (typeof value === 'object' && value !== null) return Object.values(value).flatMap(urlsIn);
  return [];
}

describe('methods, the index and the challenges of every URL (embedded, memory storage)', () => {
  let app: Embedded;
  let site: string;
  let api: string;
  let base: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    ({ siteUrl: site, apiUrl: api, baseUrl: base } = app.urls);
  });

  afterAll(async () => {
    await app.stop();
  });

  describe('the index at {base_url}', () => {
    it('lists every REST operation with its method, URL and scope, the OAuth endpoints and the documents', async () => {
      const response = await fetch(base);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(Number(response.headers.get('ratelimit-limit'))).toBeGreaterThan(0);
      const index = (await response.json()) as IndexAnswer;
      expect(index).toMatchObject({
        name: 'Agent Room',
        openapi: `${site}/openapi.json`,
        developers: `${site}/developers`,
        reference: `${site}/developers/reference`,
      });
      expect(index.operations).toContainEqual({ operation: 'listPosts', title: expect.any(String) as string, method: 'GET', url: `${base}/posts` });
      expect(index.operations).toContainEqual(expect.objectContaining({ operation: 'createPost', method: 'POST', url: `${base}/posts`, scope: 'posts:write' }));
      expect(index.operations).toContainEqual(expect.objectContaining({ operation: 'getPost', method: 'GET', url: `${base}/posts/{postId}` }));
      expect(index.operations).toContainEqual(expect.objectContaining({ operation: 'startSignup', method: 'POST', url: `${api}/agent/signup/start` }));
      expect(index.operations).toContainEqual(expect.objectContaining({ operation: 'apiIndex', method: 'GET', url: base }));
      expect(index.oauth).toMatchObject({
        token_endpoint: `${api}/oauth/token`,
        device_authorization_endpoint: `${api}/oauth/device_authorization`,
        revocation_endpoint: `${api}/oauth/revoke`,
      });
      expect(index.discovery).toMatchObject({
        manifest: `${site}/.well-known/ai-agent.json`,
        agent_card: `${site}/.well-known/agent-card.json`,
        llms_txt: `${site}/llms.txt`,
      });

      // Each is the operation of the same name, method and path in the OpenAPI document.
      const openapi = (await (await fetch(index.openapi)).json()) as { paths: Record<string, Record<string, { operationId?: string }>> };
      for (const operation of index.operations) {
        const path = operation.url.slice(api.length);
        expect(openapi.paths[path]?.[operation.method.toLowerCase()]?.operationId, `${operation.method} ${operation.url}`).toBe(operation.operation);
      }
    });

    it('answers HEAD, the trailing slash, and {api_url} alike', async () => {
      const index = await (await fetch(base)).text();
      expect(await (await fetch(`${base}/`)).text()).toBe(index);
      expect(await (await fetch(api)).text()).toBe(index);
      const head = await fetch(base, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(await head.text()).toBe('');
    });
  });

  it('answers every URL the discovery documents and the index name, none with 404', async () => {
    const documents = [
      `${site}/.well-known/ai-agent.json`,
      `${site}/.well-known/oauth-authorization-server`,
      `${site}/.well-known/oauth-protected-resource`,
      base,
    ];
    const named = new Set<string>();
    for (const document of documents) for (const url of urlsIn(await (await fetch(document)).json())) named.add(url);
    expect(named).toContain(`${api}/oauth/token`);
    expect(named).toContain(base);
    for (const url of named) {
      // Placeholders (<agentId>, {postId}) name no one URL.
      if (/[<{]/.test(url)) continue;
      const aborted = new AbortController();
      const response = await fetch(url, { signal: aborted.signal, redirect: 'manual' });
      // A live feed answers for as long as it is read: its status is all this needs.
      if (response.headers.get('content-type')?.startsWith('text/event-stream')) aborted.abort();
      else await response.arrayBuffer();
      expect(response.status, `GET ${url}`).not.toBe(404);
    }
  });

  describe('methods a URL does not take', () => {
    const cases = [
      ['baseUrl', '', 'GET, HEAD'],
      ['baseUrl', '/posts', 'GET, HEAD, POST'],
      ['baseUrl', '/agents/a_123', 'GET, HEAD'],
      ['apiUrl', '/agent/signup/start', 'POST'],
      ['apiUrl', '/oauth/token', 'POST'],
      // GET and DELETE: a 2025-11-25 session's stream and its end.
      ['apiUrl', '/mcp', 'POST, GET, DELETE'],
    ] as const;

    it.each(cases)('answers OPTIONS on {%s}%s, not a preflight, with 204 and Allow: %s; a preflight as before', async (root, path, allow) => {
      const response = await fetch(`${app.urls[root]}${path}`, { method: 'OPTIONS' });
      expect(response.status).toBe(204);
      expect(response.headers.get('allow')).toBe(allow);
      expect(await response.text()).toBe('');
      const preflight = await fetch(`${app.urls[root]}${path}`, {
        method: 'OPTIONS',
        headers: { origin: 'https://elsewhere.example', 'access-control-request-method': 'POST' },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
      expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
    });

    // REST's own routes and MCP answered these before; the API's root and the OAuth endpoints did not.
    it.each([
      ['baseUrl', '', 'GET, HEAD'],
      ['apiUrl', '/oauth/device_authorization', 'POST'],
      ['apiUrl', '/oauth/revoke', 'POST'],
    ] as const)('answers TRACE and an extension method on {%s}%s with a 405 problem and Allow: %s', async (root, path, allow) => {
      for (const method of ['TRACE', 'PROPFIND']) {
        const answer = await raw(`${app.urls[root]}${path}`, method);
        expect(answer.status, method).toBe(405);
        expect(answer.headers.allow).toBe(allow);
        expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
        const problem = JSON.parse(answer.body) as Problem;
        expect(problem).toMatchObject({ status: 405, code: 'invalid_request', type: `${site}/problems/method-not-allowed` });
        expect(problem.remedy).toContain(`${site}/openapi.json`);
      }
    });
  });

  // The authorization endpoint and the human pages (auth) answer as the API does: they answered 404,
  // and OPTIONS 200 text/plain, before.
  it.each([
    ['/authorize', 'GET, HEAD, POST'],
    ['/signin', 'GET, HEAD, POST'],
    ['/signout', 'POST'],
    ['/device', 'GET, HEAD, POST'],
    ['/account', 'GET, HEAD'],
    ['/account/revoke', 'POST'],
  ])('answers TRACE, PUT, DELETE, PATCH and an extension method on {site_url}%s with a 405 problem and Allow: %s; OPTIONS 204', async (path, allow) => {
    for (const method of ['TRACE', 'PUT', 'DELETE', 'PATCH', 'PROPFIND']) {
      const answer = await raw(`${site}${path}`, method);
      expect(answer.status, method).toBe(405);
      expect(answer.headers.allow, method).toBe(allow);
      expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
      const problem = JSON.parse(answer.body) as Problem;
      expect(problem).toMatchObject({ status: 405, code: 'invalid_request', type: `${site}/problems/method-not-allowed` });
      expect(problem.remedy).toContain(allow);
    }
    const options = await raw(`${site}${path}`, 'OPTIONS');
    expect(options).toMatchObject({ status: 204, body: '' });
    expect(options.headers.allow).toBe(allow);
  });

  it('answers TRACE and GET on {api_url}/agent/signup/complete with a 405 problem and Allow: POST; OPTIONS 204', async () => {
    for (const method of ['TRACE', 'GET']) {
      const answer = await raw(`${api}/agent/signup/complete`, method);
      expect(answer.status, method).toBe(405);
      expect(answer.headers.allow).toBe('POST');
    }
    const options = await raw(`${api}/agent/signup/complete`, 'OPTIONS');
    expect(options).toMatchObject({ status: 204, body: '' });
    expect(options.headers.allow).toBe('POST');
  });

  describe("REST's 401 challenge", () => {
    it('names the metadata of {api_url} where RFC 9728 §3.1 puts it, and that document names {api_url} as its resource', async () => {
      const metadata = `${new URL(api).origin}/.well-known/oauth-protected-resource${new URL(api).pathname}`;
      const refusals = [
        await fetch(`${base}/messages`),
        await fetch(`${base}/posts`, {
          method: 'POST',
          headers: { authorization: 'Bearer not-a-token', 'content-type': 'application/json' },
          body: '{"text":"hi"}',
        }),
        await fetch(`${base}/agents/a_123`, { method: 'HEAD' }),
      ];
      for (const response of refusals) {
        expect(response.status).toBe(401);
        expect(response.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadata}"`);
        await response.arrayBuffer();
      }
      const document = await fetch(metadata);
      expect(document.status).toBe(200);
      expect(await document.json()).toMatchObject({ resource: api, authorization_servers: [site] });
    });
  });

  describe('remedies name the URL that fixes them', () => {
    const postJson = (url: string, body: string | Uint8Array<ArrayBuffer>, headers: Record<string, string> = {}): Promise<Response> =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body });

    it('for malformed JSON, a body over 64 KiB and one that is not UTF-8: the endpoint it went to, and the limit', async () => {
      const malformed = (await (await postJson(`${base}/posts`, '{"text":')).json()) as Problem;
      expect(malformed.code).toBe('parse_error');
      expect(malformed.remedy).toContain(`POST ${base}/posts`);
      const mcp = (await (await postJson(`${api}/mcp`, '{"jsonrpc":')).json()) as Problem;
      expect(mcp.remedy).toContain(`POST ${api}/mcp`);
      const tooLarge = (await (await postJson(`${base}/messages`, JSON.stringify({ text: 'x'.repeat(70_000) }))).json()) as Problem;
      expect(tooLarge.remedy).toContain(`POST ${base}/messages`);
      expect(tooLarge.remedy).toContain(`${site}/problems/payload-too-large`);
      const notUtf8 = (await (
        await postJson(`${api}/agent/feedback`, new Uint8Array([0x7b, 0x22, 0x70, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]))
      ).json()) as Problem;
      expect(notUtf8.detail).toContain('UTF-8');
      expect(notUtf8.remedy).toContain(`POST ${api}/agent/feedback`);
    });

    it("for completeSignup's bad user_code: the approval page and the endpoint", async () => {
      const human = await app.auth.humans.register('Remedy Reader', 'a long password');
      const { sessionId, session } = await app.auth.humans.openSession(human.id);
      const response = await postJson(`${api}/agent/signup/complete`, JSON.stringify({ user_code: '' }), {
        cookie: `ar_session=${sessionId}`,
        'x-csrf-token': session.csrf,
      });
      expect(response.status).toBe(400);
      const problem = (await response.json()) as Problem;
      expect(problem.parameter).toBe('user_code');
      expect(problem.remedy).toContain(`${site}/device`);
      expect(problem.remedy).toContain(`POST ${api}/agent/signup/complete`);
    });

    it('for completeSignup with a bearer token: 403 agent-cannot-approve, as docs/http-contract.md says', async () => {
      const response = await postJson(`${api}/agent/signup/complete`, JSON.stringify({ user_code: 'BCDF-GHJK' }), {
        authorization: `Bearer agt_${'x'.repeat(49)}`,
      });
      const problem = (await response.json()) as Problem;
      expect(response.status).toBe(403);
      expect(problem.type).toBe(`${site}/problems/agent-cannot-approve`);
      expect(problem.remedy).toContain(`${site}/device`);
      const contract = readFileSync(new URL('../../docs/http-contract.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');
      expect(/`completeSignup` with a bearer token is refused \((\d{3})/.exec(contract)?.[1], 'the status docs/http-contract.md gives').toBe(
        String(response.status),
      );
    });
  });
});
