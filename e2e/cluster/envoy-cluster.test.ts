import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The human's side of sign-up over the pages (auth's, here through Envoy), shared with the benchmark.
import { approvedToken } from '@agentroom/testkit';
import { a2aClient, partsOf, send, textMessage } from '../support/a2a.js';
import type { Problem } from '../support/agent.js';
import { decoded, rawRequest } from '../support/compression.js';
import { callTool } from '../support/mcp.js';
import { type ClusterProcess, root, startClusterProcess } from '../support/processes.js';
import { SseClient } from '../support/sse.js';

interface Ready {
  site: string;
  api: string;
  router: string;
  edges: string[];
  envoy: { admin: string; bootstrap: string };
}

interface Post {
  id: string;
  agentName: string;
  text: string;
  via: string;
}

/** One request by Node's HTTP client, which sends TRACE (fetch() refuses to): its status and headers. */
function rawStatus(url: string, method: string): Promise<{ status: number; allow: string | undefined }> {
  return new Promise((resolve, reject) => {
    const sent = request(url, { method }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, allow: res.headers.allow }));
      res.on('error', reject);
    });
    sent.on('error', reject);
    sent.end();
  });
}

/**
 * `npm run cluster -- --envoy`: every service its own process, and the real Envoy on PORT with the
 * bootstrap rendered from the route table, in place of the local router. The whole journey of an
 * agent goes through Envoy, as it does in Kubernetes.
 */
describe('npm run cluster -- --envoy', () => {
  let cluster: ClusterProcess<Ready>;
  let ready: Ready;
  let lines: string[] = [];
  /** Every answer that came through Envoy, the SDK clients' included. */
  const answers: { what: string; response: Response }[] = [];
  const fetchBefore = globalThis.fetch;

  beforeAll(async () => {
    if (!existsSync(`${root}.venv/bin/envoy`)) throw new Error('.venv/bin/envoy is missing: install it with `bash scripts/install-python-tools.sh`');
    cluster = await startClusterProcess<Ready>(['--envoy'], 80_000);
    ready = cluster.ready;
    lines = cluster.lines;
    const envoyOrigin = new URL(ready.site).origin;
    globalThis.fetch = async (input, init) => {
      const response = await fetchBefore(input, init);
      const url = new URL(response.url);
      if (url.origin === envoyOrigin)
        answers.push({
          what: `${init?.method ?? (input instanceof Request ? input.method : 'GET')} ${url.origin}${url.pathname} ${response.status}`,
          response,
        });
      return response;
    };
  }, 90_000);

  afterAll(async () => {
    globalThis.fetch = fetchBefore;
    await cluster?.stop();
  });

  it('puts Envoy on PORT in place of the router', async () => {
    expect(ready.router).toBe(`http://127.0.0.1:${new URL(ready.site).port}`);
    expect(lines.join('\n')).toMatch(/cluster ready at .*2 edge process\(es\) and Envoy \(.*\.venv\/bin\/envoy, admin http:\/\/127\.0\.0\.1:\d+\)/);
    expect(lines.some((line) => line.includes('"service":"router"'))).toBe(false);
    // Envoy health-checks every edge process and auth at /readyz on their admin ports, and finds them ready.
    const clusters = await (await fetchBefore(`${ready.envoy.admin}/clusters`)).text();
    const health = clusters.split('\n').filter((line) => line.includes('::health_flags::'));
    expect(health).toHaveLength(3);
    for (const line of health) expect(line).toMatch(/::health_flags::healthy$/);
  });

  it('serves the discovery documents itself: manifest, OpenAPI, llms.txt, problem pages, the reference script; HEAD, preflight, 405', async () => {
    const manifest = await fetch(`${ready.site}/.well-known/ai-agent.json`, { headers: { 'x-request-id': 'envoy-journey-1' } });
    expect(manifest.status).toBe(200);
    expect(manifest.headers.get('x-request-id')).toBe('envoy-journey-1');
    expect(await manifest.json()).toMatchObject({ url: ready.site, interfaces: { rest: { url: ready.api } } });
    const openapi = await fetch(`${ready.site}/openapi.json`);
    expect(openapi.headers.get('content-type')).toBe('application/json');
    expect(await openapi.json()).toMatchObject({ openapi: expect.stringMatching(/^3\.1/), servers: [{ url: ready.api.replace(/\/v1$/, '') }] });
    const llms = await fetch(`${ready.site}/llms.txt`);
    expect(llms.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(await llms.text()).toContain(ready.api);
    const problem = await fetch(`${ready.site}/problems/rate-limited`);
    expect(problem.status).toBe(200);
    expect(problem.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect(await problem.text()).toContain('The daily quota is spent');
    // The bundle, under the versioned link the interactive reference gives it: kept a year.
    const bundle =
      /src="([^"]+\/developers\/assets\/scalar\.js\?v=[^"]+)"/.exec(await (await fetch(`${ready.site}/developers/reference/interactive`)).text())?.[1] ?? '';
    const scalar = await fetch(bundle);
    expect(scalar.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(scalar.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect((await scalar.arrayBuffer()).byteLength).toBeGreaterThan(1_000_000);

    const head = await fetch(`${ready.site}/openapi.json`, { method: 'HEAD', headers: { 'accept-encoding': 'identity' } });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get('content-length'))).toBeGreaterThan(10_000);
    // Compressed, as the documents were written for this deployment (docs/decisions.md §25).
    const compressed = await rawRequest(`${ready.site}/openapi.json`, { 'accept-encoding': 'br' });
    expect(compressed.headers['content-encoding']).toBe('br');
    expect(JSON.parse(decoded(compressed).toString('utf8'))).toMatchObject({ openapi: expect.stringMatching(/^3\.1/) });
    const preflight = await fetch(`${ready.site}/openapi.json`, {
      method: 'OPTIONS',
      headers: { origin: 'https://tools.example', 'access-control-request-method': 'GET' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    const refused = await fetch(`${ready.site}/llms.txt`, { method: 'PUT', body: 'x' });
    expect(refused.status).toBe(405);
    expect(refused.headers.get('allow')).toBe('GET, HEAD');
    expect(((await refused.json()) as Problem).code).toBe('invalid_request');
  });

  it("passes TRACE and OPTIONS on to auth's authorization endpoint, which answers 405 and 204 with Allow", async () => {
    for (const method of ['TRACE', 'PUT'])
      expect(await rawStatus(`${ready.site}/authorize`, method), method).toEqual({ status: 405, allow: 'GET, HEAD, POST' });
    expect(await rawStatus(`${ready.site}/authorize`, 'OPTIONS')).toEqual({ status: 204, allow: 'GET, HEAD, POST' });
  });

  it("sends what it does not serve to edge, which answers the 404 problem, counted against the caller's quota", async () => {
    const response = await fetch(`${ready.site}/no/such/page`, { headers: { accept: 'application/json' } });
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(((await response.json()) as Problem).code).toBe('not_found');
    expect(Number(response.headers.get('ratelimit-remaining'))).toBeLessThan(Number(response.headers.get('ratelimit-limit')));
  });

  it('passes the real client address on, and not a forged X-Forwarded-For: one quota, whatever the client claims', async () => {
    // The same client (127.0.0.1) through Envoy, straight to an edge process, then through Envoy
    // claiming other addresses: all three calls count against one address, the real one.
    // First one call straight to edge, uncounted here: the contract check of the test setup reads
    // that origin's /openapi.json once, and that call counts too.
    await (await fetch(`${ready.edges[0]}/api/v1/posts?limit=1`)).arrayBuffer();
    const remaining: number[] = [];
    for (const [base, forged] of [
      [ready.api, undefined],
      [`${ready.edges[0]}/api/v1`, undefined],
      [ready.api, '10.0.0.1'],
      [ready.api, '203.0.113.9, 10.0.0.2'],
    ] as const) {
      const response = await fetch(`${base}/posts?limit=1`, { headers: forged === undefined ? {} : { 'x-forwarded-for': forged } });
      expect(response.status).toBe(200);
      await response.arrayBuffer();
      remaining.push(Number(response.headers.get('ratelimit-remaining')));
    }
    const [first] = remaining as [number];
    expect(remaining).toEqual([first, first - 1, first - 2, first - 3]);
  });

  it('signs an agent up through the pages, posts once with an Idempotency-Key, and a live subscriber gets the post', async () => {
    const token = await approvedToken(ready.site, ['posts:write'], 'envoy-journey');
    const live = await SseClient.connect(`${ready.api}/posts/stream`);
    const post = (key: string) =>
      fetch(`${ready.api}/posts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ text: 'through Envoy, exactly once' }),
      });
    const first = await post('envoy-journey-key-1');
    expect(first.status).toBe(201);
    const made = (await first.json()) as Post;
    const again = await post('envoy-journey-key-1');
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(((await again.json()) as Post).id).toBe(made.id);

    const [event] = await live.waitForEvents(1, 5_000);
    live.close();
    expect(event).toMatchObject({ id: made.id, event: 'post' });
    expect(JSON.parse(event?.data ?? '{}')).toMatchObject({ id: made.id, agentName: 'envoy-journey', text: 'through Envoy, exactly once' });
    const listed = (await (await fetch(`${ready.api}/posts?limit=5`)).json()) as { data: Post[] };
    expect(listed.data.filter((p) => p.text === 'through Envoy, exactly once')).toHaveLength(1);
  });

  it("posts over MCP with the SDK's client and over A2A with the SDK's client", async () => {
    const token = await approvedToken(ready.site, ['posts:write'], 'envoy-protocols');
    const apiUrl = ready.api.replace(/\/v1$/, '');
    const mcp = new Client({ name: 'envoy-journey', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${apiUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    const tools = (await mcp.listTools()).tools.map((tool) => tool.name);
    expect(tools).toContain('room_post');
    const posted = await callTool(mcp, 'room_post', { text: 'hello over MCP, through Envoy' });
    await mcp.close();
    expect(posted.structuredContent).toMatchObject({ agentName: 'envoy-protocols', text: 'hello over MCP, through Envoy', via: 'mcp' });

    const room = await a2aClient(ready.site);
    const answer = partsOf(await send(room, textMessage(['hello over A2A, through Envoy']), token));
    expect(answer.data.post).toMatchObject({ agentName: 'envoy-protocols', text: 'hello over A2A, through Envoy', via: 'a2a' });
  });

  it('gave every answer through Envoy a request id and RateLimit headers, documents and the 404 included', () => {
    expect(answers.length).toBeGreaterThan(25);
    const missing = answers.filter(
      ({ response }) => !['x-request-id', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'].every((name) => response.headers.has(name)),
    );
    expect(missing.map(({ what }) => what)).toEqual([]);
    for (const what of ['/developers/assets/scalar.js 200', '/no/such/page 404', '/llms.txt 405', '/openapi.json 204', '/api/mcp 200', '/api/a2a 200']) {
      expect(
        answers.some((answer) => answer.what.endsWith(what)),
        what,
      ).toBe(true);
    }
  });

  it('logs every answer as a JSON line with its request id', async () => {
    // Envoy writes its access log out every second or so.
    const deadline = Date.now() + 10_000;
    let line: string | undefined;
    while (line === undefined && Date.now() < deadline) {
      line = lines.find((candidate) => candidate.includes('"service":"envoy"') && candidate.includes('"requestId":"envoy-journey-1"'));
      if (line === undefined) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(line, 'an access log line for envoy-journey-1').toBeDefined();
    // Answered by the documents' Lua filter, on the gateway's route for it, not by edge.
    expect(JSON.parse(line as string)).toMatchObject({
      http: { method: 'GET', path: '/.well-known/ai-agent.json', status: 200 },
      route: 'documents at /.well-known/ai-agent.json',
      details: 'lua_response',
    });
  });

  it('writes every log line whole while Envoy and the edges log at once', async () => {
    // Envoy writes its access log out in blocks far larger than a pipe takes in one write: passed on
    // as they came, a block could be cut mid-line by a line of an edge writing to the same output.
    const from = lines.length;
    const url = `${ready.api}/posts?limit=1`;
    for (let round = 0; round < 30; round += 1) {
      await Promise.all(Array.from({ length: 100 }, () => fetchBefore(url).then((response) => response.arrayBuffer())));
    }
    // Envoy writes its access log out every second or so.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const logged = lines.slice(from).filter((line) => line.includes('"service":'));
    const broken = logged.filter((line) => {
      try {
        return typeof JSON.parse(line) !== 'object';
      } catch {
        return true;
      }
    });
    expect(logged.filter((line) => line.includes('"service":"envoy"')).length).toBeGreaterThan(2_500);
    expect(broken.slice(0, 3)).toEqual([]);
  }, 60_000);

  it('stops Envoy and every process on SIGTERM and exits 0', async () => {
    expect(await cluster.stop()).toBe(0);
    expect(existsSync(ready.envoy.bootstrap)).toBe(false);
    const after = await fetchBefore(ready.router).catch((error: unknown) => error);
    expect(after).toBeInstanceOf(Error);
  });
});
