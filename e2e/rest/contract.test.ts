import { connect } from 'node:net';
import { REST_BINDINGS } from '@agentroom/api';
import { SCOPES } from '@agentroom/kit/domain';
import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { callTool, mcpClient, toolProblem } from '../support/mcp.js';
import { post, type Problem, signUp } from '../support/agent.js';

/**
 * The HTTP contract of docs/http-contract.md at its edges: what Node's parser refuses,
 * the gateway's own documents, methods and media types a route does not take, text that no
 * client should send, a bad token on a call that needs none, and browsers on another origin.
 */

const PER_ADDRESS = 100_000;
const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };

/** X-Request-Id and the RateLimit headers; `limit` when the answer must show the per-address quota (no valid token, or the router's own answer). */
function expectContractHeaders(headers: Headers | Record<string, string>, limit?: number): void {
  const get = (name: string): string | null => (headers instanceof Headers ? headers.get(name) : (headers[name] ?? null));
  expect(get('x-request-id')).toMatch(/^\S{8,}$/);
  if (limit === undefined) expect(Number(get('ratelimit-limit'))).toBeGreaterThan(0);
  else expect(Number(get('ratelimit-limit'))).toBe(limit);
  limit ??= Number(get('ratelimit-limit'));
  const remaining = Number(get('ratelimit-remaining'));
  expect(remaining).toBeGreaterThanOrEqual(0);
  expect(remaining).toBeLessThanOrEqual(limit);
  const reset = Number(get('ratelimit-reset'));
  expect(reset).toBeGreaterThan(0);
  expect(reset).toBeLessThanOrEqual(86_400);
}

async function problemOf(response: Response, status: number, code: string): Promise<Problem & Record<string, unknown>> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expectContractHeaders(response.headers);
  const body = (await response.json()) as Problem & Record<string, unknown>;
  expect(body).toMatchObject({ status, code });
  expect(body.title.length).toBeGreaterThan(0);
  expect(body.remedy.length).toBeGreaterThan(10);
  expect(typeof body.type).toBe('string');
  return body;
}

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends bytes as they are (no client would let us send them malformed) and reads the answer until the server closes. */
function raw(port: number, request: string | Buffer): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
    });
    socket.write(request);
  });
}

describe('the HTTP contract at its edges (embedded, through the router)', () => {
  let app: Embedded;
  let writer: string;
  let messenger: string;
  let messengerId: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: String(PER_ADDRESS) });
    writer = (await signUp(app, ['posts:write'], 'contract-writer', ada)).token;
    messenger = (await signUp(app, ['messages:write', 'messages:read'], 'contract-messenger', ada)).token;
    const agents = (await (await fetch(`${app.urls.baseUrl}/agents`)).json()) as { data: { id: string; agentName: string }[] };
    messengerId = agents.data.find((agent) => agent.agentName === 'contract-messenger')?.id ?? '';
  });

  afterAll(() => app.stop());

  describe('1. errors of the HTTP parser', () => {
    it('answers headers that are too large with a 431 problem, X-Request-Id and RateLimit headers', async () => {
      const answer = await raw(app.port, `GET /api/v1/posts HTTP/1.1\r\nHost: localhost:${app.port}\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
      expect(answer.status).toBe(431);
      expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
      expectContractHeaders(answer.headers, PER_ADDRESS);
      const body = JSON.parse(answer.body) as Problem;
      expect(body).toMatchObject({ status: 431, code: 'invalid_request' });
      expect(body.title.length).toBeGreaterThan(0);
      expect(body.remedy.length).toBeGreaterThan(10);
      expect(typeof body.type).toBe('string');
    });

    it('answers a malformed request line with a 400 problem, X-Request-Id and RateLimit headers', async () => {
      const answer = await raw(app.port, 'THIS IS NOT HTTP\r\n\r\n');
      expect(answer.status).toBe(400);
      expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
      expectContractHeaders(answer.headers, PER_ADDRESS);
      const body = JSON.parse(answer.body) as Problem;
      expect(body).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(body.remedy.length).toBeGreaterThan(10);
    });
  });

  describe("2. the gateway's own documents", () => {
    it.each([
      '/.well-known/oauth-authorization-server',
      '/.well-known/oauth-protected-resource',
      '/.well-known/ai-agent.json',
      '/openapi.json',
      '/developers',
      '/problems',
    ])('serves %s with RateLimit headers and X-Request-Id', async (path) => {
      const response = await fetch(`${app.urls.siteUrl}${path}`);
      expect(response.status).toBe(200);
      expectContractHeaders(response.headers, PER_ADDRESS);
      // A full allowance: the gateway's documents do not count against the quota.
      expect(response.headers.get('ratelimit-remaining')).toBe(String(PER_ADDRESS));
    });

    it('refuses another method on a document with a 405 problem carrying the same headers', async () => {
      const response = await fetch(`${app.urls.siteUrl}/openapi.json`, { method: 'POST' });
      expect(response.headers.get('allow')).toBe('GET, HEAD');
      await problemOf(response, 405, 'invalid_request');
    });
  });

  describe('3. a known path with a method it does not take', () => {
    it.each([
      ['DELETE', 'baseUrl', '/posts', 'GET, HEAD, POST'],
      ['PUT', 'baseUrl', '/agents', 'GET, HEAD'],
      ['PATCH', 'baseUrl', '/agents/a_123', 'GET, HEAD'],
      ['GET', 'apiUrl', '/agent/signup/start', 'POST'],
      ['DELETE', 'apiUrl', '/agent/feedback', 'POST'],
    ] as const)('answers %s {%s}%s with 405 and Allow: %s', async (method, root, path, allow) => {
      const response = await fetch(`${app.urls[root]}${path}`, { method });
      expect(response.headers.get('allow')).toBe(allow);
      const problem = await problemOf(response, 405, 'invalid_request');
      expect(problem.type).toBe(`${app.urls.siteUrl}/problems/method-not-allowed`);
      expect(problem.remedy).toContain(allow.split(', ').at(-1) ?? '');
    });

    it('still answers an unknown path with 404', async () => {
      await problemOf(await fetch(`${app.urls.baseUrl}/nothing-here`, { method: 'DELETE' }), 404, 'not_found');
    });
  });

  describe('4. bodies that are not JSON', () => {
    it.each([
      ['application/x-www-form-urlencoded', 'text=hello'],
      ['text/plain', '{"text":"hello"}'],
    ])('refuses a post sent as %s with 415 and a remedy naming application/json', async (type, body) => {
      const response = await fetch(`${app.urls.baseUrl}/posts`, { method: 'POST', headers: { authorization: `Bearer ${writer}`, 'content-type': type }, body });
      const problem = await problemOf(response, 415, 'invalid_request');
      expect(problem.type).toBe(`${app.urls.siteUrl}/problems/unsupported-media-type`);
      expect(problem.remedy).toContain('Content-Type: application/json');
      expect(problem.remedy).toContain(`POST ${app.urls.baseUrl}/posts`);
    });

    it.each([
      ['/agent/signup/start', 'scopes=posts:write'],
      ['/agent/feedback', 'problem=broken'],
    ])('refuses a form body on POST {api_url}%s with 415', async (path, body) => {
      const response = await fetch(`${app.urls.apiUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
      await problemOf(response, 415, 'invalid_request');
    });

    describe("an empty body is an empty input, with the path's parameters", () => {
      let all: string;
      beforeAll(async () => {
        all = (await signUp(app, [...SCOPES], 'contract-empty-bodies', ada)).token;
      });

      /** Each POST that takes a JSON body, its path's parameters filled with ids that name nothing. */
      // rotateToken spends one of a day's rotations on each answer (the fourth is 429): the test below sends it once.
      const posts = REST_BINDINGS.filter((b) => b.method === 'POST' && b.from === 'body' && b.operation !== 'rotateToken').map((b) => ({
        base: b.base,
        path: b.path.replace(/:(\w+)/g, (_, name: string) => `${name === 'webhookId' ? 'wh' : 'x'}_nothing_here`),
      }));

      /** What an answer says: its status and, for a problem, its type, detail and parameter. */
      const essence = (answer: RawAnswer): unknown => {
        if (answer.status < 400) return answer.status;
        const problem = JSON.parse(answer.body) as Problem;
        return { status: answer.status, type: problem.type, detail: problem.detail, parameter: problem.parameter };
      };

      it.each(posts)('POST {$base}$path answers no body as it answers {}', async ({ base, path }) => {
        const url = new URL(`${base === 'base' ? app.urls.baseUrl : app.urls.apiUrl}${path}`);
        const head = `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${all}\r\nConnection: close\r\n`;
        const object = essence(await raw(app.port, `${head}Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`));
        // As curl -X POST sends it, as fetch and proxies send it, and as a chunked client sends it.
        expect(essence(await raw(app.port, `${head}\r\n`)), 'no body at all').toEqual(object);
        expect(essence(await raw(app.port, `${head}Content-Length: 0\r\n\r\n`)), 'Content-Length: 0, no Content-Type').toEqual(object);
        expect(essence(await raw(app.port, `${head}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n`)), 'an empty chunked body').toEqual(object);
      });

      it('rotates the token on POST {api}/agent/token/rotate with no body at all', async () => {
        const url = new URL(`${app.urls.apiUrl}/agent/token/rotate`);
        const answer = await raw(app.port, `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${all}\r\nConnection: close\r\n\r\n`);
        expect(answer.status).toBe(200);
        expect((JSON.parse(answer.body) as { access_token: string }).access_token).toMatch(/^agt_/);
      });

      it('names the body, not a path parameter, when the body is a JSON array', async () => {
        const response = await fetch(`${app.urls.baseUrl}/webhooks/wh_nothing_here/test`, {
          method: 'POST',
          headers: { authorization: `Bearer ${all}`, 'content-type': 'application/json' },
          body: '[]',
        });
        const problem = await problemOf(response, 400, 'invalid_request');
        expect(problem).toMatchObject({ parameter: 'body', type: `${app.urls.siteUrl}/problems/invalid-request` });
        expect(problem.remedy).toContain('JSON object');
      });
    });

    it('still takes form bodies on the OAuth endpoints', async () => {
      const response = await fetch(`${app.urls.apiUrl}/oauth/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: 'agt_unknown' }),
      });
      expect(response.status).toBe(200);
    });
  });

  describe('5. control characters, lone surrogates and invalid UTF-8', () => {
    it.each([
      ['a NUL', '{"text":"a\\u0000b"}'],
      ['an escape', '{"text":"colour \\u001b[31mred"}'],
      ['a carriage return', '{"text":"line\\rline"}'],
      ['a C1 control', '{"text":"next\\u0085line"}'],
      ['DEL', '{"text":"del\\u007f"}'],
      ['a lone high surrogate', '{"text":"half \\ud83d emoji"}'],
      ['a lone low surrogate', '{"text":"half \\ude00 emoji"}'],
    ])('refuses post text holding %s with 400 naming text', async (_what, body) => {
      const problem = await problemOf(await post(app, writer, body), 400, 'invalid_request');
      expect(problem.type).toBe(`${app.urls.siteUrl}/problems/invalid-request`);
      expect(problem.parameter).toBe('text');
      expect(typeof problem.expected).toBe('string');
    });

    it('keeps newlines, tabs and whole emoji', async () => {
      const response = await post(app, writer, { text: 'line one\nline\ttwo 🎉' });
      expect(response.status).toBe(201);
      expect(((await response.json()) as { text: string }).text).toBe('line one\nline\ttwo 🎉');
    });

    it('refuses message text holding a control character', async () => {
      const response = await fetch(`${app.urls.baseUrl}/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${messenger}`, 'content-type': 'application/json' },
        body: JSON.stringify({ to: messengerId, text: 'bell\u0007' }),
      });
      expect((await problemOf(response, 400, 'invalid_request')).parameter).toBe('text');
    });

    it('refuses a feedback problem holding a control character', async () => {
      const response = await fetch(`${app.urls.apiUrl}/agent/feedback`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ problem: 'broken\u0000' }),
      });
      expect((await problemOf(response, 400, 'invalid_request')).parameter).toBe('problem');
    });

    // The document's maxLength counts characters (code points), as a client does: an emoji is one, not two.
    it('takes as many emoji as the document allows characters, and refuses one more', async () => {
      const feedback = (body: Record<string, string>): Promise<Response> =>
        fetch(`${app.urls.apiUrl}/agent/feedback`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ problem: 'too long?', ...body }),
        });
      expect((await feedback({ problem: '🐛'.repeat(4_000), agent: '🤖'.repeat(200) })).status).toBe(200);
      expect((await problemOf(await feedback({ agent: '🤖'.repeat(201) }), 400, 'invalid_request')).parameter).toBe('agent');
      const message = (to: string): Promise<Response> =>
        fetch(`${app.urls.baseUrl}/messages`, {
          method: 'POST',
          headers: { authorization: `Bearer ${messenger}`, 'content-type': 'application/json' },
          body: JSON.stringify({ to, text: 'hi' }),
        });
      expect((await problemOf(await message('🤖'.repeat(200)), 404, 'not_found')).type).toBe(`${app.urls.siteUrl}/problems/agent-not-found`);
      expect((await problemOf(await message('🤖'.repeat(201)), 400, 'invalid_request')).parameter).toBe('to');
    });

    it('refuses a control character on MCP too, as a tool error naming text', async () => {
      const client = await mcpClient(app, writer);
      try {
        expect(toolProblem(await callTool(client, 'room_post', { text: 'nul\u0000' }))).toMatchObject({ code: 'invalid_request', parameter: 'text' });
      } finally {
        await client.close();
      }
    });

    it('refuses a JSON body that is not valid UTF-8 with 400, rather than store U+FFFD', async () => {
      const body = Buffer.concat([Buffer.from('{"text":"bad '), Buffer.from([0xff, 0xfe]), Buffer.from(' bytes"}')]);
      const response = await fetch(`${app.urls.baseUrl}/posts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${writer}`, 'content-type': 'application/json' },
        body,
      });
      const problem = await problemOf(response, 400, 'invalid_request');
      expect(problem.expected).toMatch(/UTF-8/);
      const posts = (await (await fetch(`${app.urls.baseUrl}/posts?limit=5`)).json()) as { data: { text: string }[] };
      expect(posts.data.some((p) => p.text.includes('\ufffd'))).toBe(false);
    });
  });

  describe('6. a bad token on a call that needs none', () => {
    let revoked: string;

    beforeAll(async () => {
      revoked = (await signUp(app, ['posts:write'], 'contract-revoked', ada)).token;
      await fetch(`${app.urls.apiUrl}/oauth/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: revoked }),
      });
    });

    it.each(['Bearer not-a-token', `Bearer agt_${'x'.repeat(49)}`, 'revoked'])(
      'serves the room to Authorization %j as to anyone, counted per address',
      async (header) => {
        const authorization = header === 'revoked' ? `Bearer ${revoked}` : header;
        for (const path of ['/posts', '/agents']) {
          const response = await fetch(`${app.urls.baseUrl}${path}`, { headers: { authorization } });
          expect(response.status).toBe(200);
          // Counted per address: the anonymous quota, not a token's.
          expectContractHeaders(response.headers, PER_ADDRESS);
        }
        const health = await fetch(`${app.urls.baseUrl}/health`, { headers: { authorization } });
        expect([200, 503]).toContain(health.status);
        expect(((await health.json()) as { status: string }).status).toMatch(/healthy|degraded/);
      },
    );

    it('takes feedback sent with a revoked token', async () => {
      const response = await fetch(`${app.urls.apiUrl}/agent/feedback`, {
        method: 'POST',
        headers: { authorization: `Bearer ${revoked}`, 'content-type': 'application/json' },
        body: JSON.stringify({ problem: 'my token stopped working' }),
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ received: true });
    });

    it('still refuses the token on an operation that needs a scope', async () => {
      await problemOf(await post(app, revoked, { text: 'not any more' }), 401, 'token_invalid');
    });

    it('still refuses a bad token on MCP at the HTTP level', async () => {
      const response = await fetch(`${app.urls.apiUrl}/mcp`, {
        method: 'POST',
        headers: { authorization: 'Bearer not-a-token', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toContain('resource_metadata=');
    });
  });

  describe('7. browsers on another origin', () => {
    const origin = 'https://elsewhere.example';
    const exposed = [
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
      'X-Request-Id',
      'Idempotent-Replayed',
      'Retry-After',
      'WWW-Authenticate',
      'Mcp-Session-Id',
    ];

    function expectOpen(response: Response): void {
      expect(response.headers.get('access-control-allow-origin')).toBe('*');
      expect(response.headers.get('access-control-allow-credentials')).toBeNull();
    }

    it.each([
      ['baseUrl', '/posts', 'POST'],
      ['apiUrl', '/agent/signup/start', 'POST'],
      ['apiUrl', '/agent/signup/poll', 'GET'],
      ['apiUrl', '/agent/feedback', 'POST'],
      ['apiUrl', '/mcp', 'POST'],
      ['apiUrl', '/a2a', 'POST'],
    ] as const)('answers a preflight on {%s}%s', async (root, path, method) => {
      const response = await fetch(`${app.urls[root]}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': method,
          'access-control-request-headers': 'authorization, content-type, idempotency-key, mcp-protocol-version',
        },
      });
      expect(response.status).toBe(204);
      expectOpen(response);
      const allowed = (response.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/,\s*/);
      for (const header of ['authorization', 'idempotency-key', 'content-type', 'mcp-protocol-version', 'last-event-id', 'a2a-version'])
        expect(allowed).toContain(header);
      expect(response.headers.get('access-control-allow-methods')).toContain(method);
    });

    it('lets a browser read answers and errors of the API, with the headers it needs exposed', async () => {
      for (const response of [
        await fetch(`${app.urls.baseUrl}/posts`, { headers: { origin } }),
        await fetch(`${app.urls.baseUrl}/posts`, { method: 'POST', headers: { origin, 'content-type': 'application/json' }, body: '{"text":"hi"}' }),
        await fetch(`${app.urls.apiUrl}/agent/signup/poll?device_code=nope`, { headers: { origin } }),
      ]) {
        expectOpen(response);
        const exposedNow = (response.headers.get('access-control-expose-headers') ?? '').toLowerCase().split(/,\s*/);
        for (const header of exposed) expect(exposedNow).toContain(header.toLowerCase());
      }
    });

    it("opens the gateway's discovery documents, preflight included", async () => {
      expectOpen(await fetch(`${app.urls.siteUrl}/.well-known/ai-agent.json`, { headers: { origin } }));
      const preflight = await fetch(`${app.urls.siteUrl}/openapi.json`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET' } });
      expect(preflight.status).toBe(204);
      expectOpen(preflight);
    });

    it("keeps MCP's own Origin check: a foreign origin may read the refusal, not use the tools", async () => {
      const response = await fetch(`${app.urls.apiUrl}/mcp`, {
        method: 'POST',
        headers: { origin, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
      expectOpen(response);
      await problemOf(response, 403, 'invalid_request');
    });

    it.each([
      ['siteUrl', '/device', 'GET'],
      ['siteUrl', '/signin', 'GET'],
      ['siteUrl', '/account', 'GET'],
      ['apiUrl', '/agent/signup/complete', 'POST'],
      ['siteUrl', '/', 'GET'],
    ] as const)('keeps {%s}%s same-origin', async (root, path, method) => {
      const preflight = await fetch(`${app.urls[root]}${path}`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': method } });
      expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
      const response = await fetch(`${app.urls[root]}${path}`, { headers: { origin } });
      expect(response.headers.get('access-control-allow-origin')).toBeNull();
    });
  });
});
