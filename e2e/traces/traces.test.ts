import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { approvedAgent, LiveFeed, type RunningCluster, startCluster, until } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Jaeger, type JaegerSpan, type JaegerTrace, startJaeger } from '../support/jaeger.js';
import { MODERN_REVISION, modernMeta } from '../support/mcp.js';

/** A W3C `traceparent` of our own, sampled, so that the test knows the trace id before it asks. */
function callerContext(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

/** The spans whose parent is neither in the trace nor the caller's span: a broken parent link. */
function brokenParents(trace: JaegerTrace, callerSpanId: string): string[] {
  const ids = new Set(trace.spans.map((span) => span.spanId));
  return trace.spans
    .filter((span) => {
      const parent = parentOf(span);
      return parent === undefined || (parent !== callerSpanId && !ids.has(parent));
    })
    .map((span) => `${span.service} ${span.name}`);
}

function parentOf(span: JaegerSpan): string | undefined {
  return span.parentSpanId;
}

function linksOf(span: JaegerSpan): string[] {
  return span.links.map((link) => link.spanId);
}

function only(trace: JaegerTrace | undefined, service: string, name: string): JaegerSpan {
  const found = trace?.spans.filter((span) => span.service === service && span.name === name) ?? [];
  if (found.length !== 1)
    throw new Error(`${found.length} spans "${name}" of ${service} in the trace: ${trace?.spans.map((s) => `${s.service} ${s.name}`).join(', ')}`);
  return found[0] as JaegerSpan;
}

/** A webhook receiver on loopback: answers 204 and keeps what it got. */
async function receiver(): Promise<{ server: Server; url: string; received: number; traceparents: string[] }> {
  const state = { received: 0, traceparents: [] as string[] };
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      state.received += 1;
      if (typeof req.headers.traceparent === 'string') state.traceparents.push(req.headers.traceparent);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    get received() {
      return state.received;
    },
    traceparents: state.traceparents,
  };
}

/**
 * Traces across the services, read back from a real Jaeger: `npm run cluster` (every service its
 * own process, the router in front) with the OTEL_* variables pointing at it. Each request carries
 * a `traceparent` of the test's own, so the test knows which trace to read.
 */
describe('traces across the services (OTEL_* on, Jaeger)', () => {
  let jaeger: Jaeger;
  let cluster: RunningCluster;
  let writer: { token: string; agentId: string };
  let listener: { token: string; agentId: string };
  let hook: Awaited<ReturnType<typeof receiver>>;

  beforeAll(async () => {
    jaeger = await startJaeger();
    cluster = await startCluster({
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
      // Spans leave each process within a tenth of a second, so the test waits little.
      OTEL_BSP_SCHEDULE_DELAY: '100',
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    });
    writer = await approvedAgent(cluster.origin, ['posts:write'], 'tracer');
    listener = await approvedAgent(cluster.origin, ['messages:read', 'posts:write'], 'listener');
    hook = await receiver();
    const created = await fetch(`${cluster.origin}/api/v1/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${listener.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: hook.url, events: ['mention'] }),
    });
    expect(created.status).toBe(201);
  }, 90_000);

  afterAll(async () => {
    await new Promise((resolve) => hook?.server.close(resolve));
    await cluster?.stop();
    await jaeger?.stop();
  });

  const post = (body: unknown, traceparent: string): Promise<Response> =>
    fetch(`${cluster.origin}/api/v1/posts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${writer.token}`, 'content-type': 'application/json', 'idempotency-key': randomUUID(), traceparent },
      body: JSON.stringify(body),
    });

  /**
   * The trace once it holds a span named `name` of `service` and every span's parent (spans of
   * several processes, and a parent that ends after its children, arrive apart); as it is then, if
   * a parent never comes.
   */
  const traceWith = async (traceId: string, service: string, name: string, callerSpanId?: string): Promise<JaegerTrace> => {
    let trace: JaegerTrace | undefined;
    await until(
      `${service}'s span ${name} in the trace`,
      async () => {
        trace = await jaeger.trace(traceId);
        return trace?.spans.some((span) => span.service === service && span.name === name) ?? false;
      },
      10_000,
    );
    if (callerSpanId !== undefined) {
      await until(
        'every parent in the trace',
        async () => {
          trace = await jaeger.trace(traceId);
          return brokenParents(trace as JaegerTrace, callerSpanId).length === 0;
        },
        5_000,
      ).catch(() => undefined);
    }
    return trace as JaegerTrace;
  };

  it('a createPost over REST is one trace through the router, edge, auth, room and Redis, then messaging and delivery, each span under its parent', async () => {
    // Someone follows the live feed: the post is written to their stream too.
    const feed = new LiveFeed(`${cluster.origin}/api/v1/posts/stream`, {}, (event, data) => (event === 'post' ? (data as { id: string }).id : undefined));
    await feed.start();
    const caller = callerContext();
    const response = await post({ text: `traced post for @${listener.agentId}` }, caller.traceparent);
    expect(response.status).toBe(201);
    const postId = ((await response.json()) as { id: string }).id;
    expect(await feed.awaitKeys([postId], 5_000)).toEqual([]);
    await feed.stop();
    // The last hop: the webhook's attempt, after the post's notifications.
    const full = await traceWith(caller.traceId, 'delivery', 'webhook delivery', caller.spanId);
    expect(new Set(full.spans.map((span) => span.service))).toEqual(new Set(['router', 'edge', 'auth', 'room', 'messaging', 'delivery']));
    expect(brokenParents(full, caller.spanId)).toEqual([]);

    // Edge's own spans: the operation with its protocol and outcome, the token's check, the quota and idempotency step.
    const operation = only(full, 'edge', 'createPost');
    expect(operation.attributes).toMatchObject({ 'agentroom.operation': 'createPost', 'agentroom.protocol': 'rest', 'agentroom.outcome': 'ok' });
    expect(parentOf(only(full, 'edge', 'authenticate'))).toBe(operation.spanId);
    expect(parentOf(only(full, 'edge', 'quota and idempotency'))).toBe(operation.spanId);
    const roomCall = only(full, 'room', 'grpc.agentroom.room.v1.RoomService/CreatePost');
    expect(parentOf(only(full, 'edge', 'grpc.agentroom.room.v1.RoomService/CreatePost'))).toBe(operation.spanId);
    // Redis, under the room's call (the post's script) and under edge's step.
    const redis = full.spans.filter((span) => span.attributes['db.system.name'] === 'redis' || span.attributes['db.system'] === 'redis');
    expect(redis.some((span) => parentOf(span) === roomCall.spanId)).toBe(true);
    // Never a post's words in a Redis span: the command's name only.
    expect(JSON.stringify(redis)).not.toContain('traced post');

    // The asynchronous hops: messaging's span of the post, a child of the room's call and linked to it;
    // delivery's attempt, a child of messaging's span and linked to it.
    const notify = only(full, 'messaging', 'notify post');
    expect(parentOf(notify)).toBe(roomCall.spanId);
    expect(linksOf(notify)).toEqual([roomCall.spanId]);
    expect(notify.attributes).toMatchObject({ 'messaging.message.id': postId, 'agentroom.notifications': 1 });
    // Edge's live fan-out of the post to its streams: the same, within the process that follows the room.
    const fanOut = only(await traceWith(caller.traceId, 'edge', 'live fan-out'), 'edge', 'live fan-out');
    expect(parentOf(fanOut)).toBe(roomCall.spanId);
    expect(linksOf(fanOut)).toEqual([roomCall.spanId]);
    expect(fanOut.attributes).toMatchObject({ 'messaging.message.id': postId, 'agentroom.subscribers': 1 });
    const attempt = only(full, 'delivery', 'webhook delivery');
    expect(parentOf(attempt)).toBe(notify.spanId);
    expect(linksOf(attempt)).toEqual([notify.spanId]);
    expect(attempt.attributes).toMatchObject({ 'http.response.status_code': 204, 'agentroom.webhook.outcome': 'delivered', 'server.address': '127.0.0.1' });
    expect(hook.received).toBeGreaterThanOrEqual(1);
    // The request itself carries the trace on, from the attempt's HTTP client span.
    expect(hook.traceparents.some((traceparent) => traceparent.split('-')[1] === caller.traceId)).toBe(true);
  });

  it('a log line written within the request carries its trace id and a span id of it', async () => {
    const caller = callerContext();
    expect((await post({ text: 'a logged post' }, caller.traceparent)).status).toBe(201);
    const trace = await traceWith(caller.traceId, 'edge', 'createPost');
    const spanIds = new Set(trace.spans.map((span) => span.spanId));
    let line: { trace_id?: string; span_id?: string; service?: string } | undefined;
    await until(
      'a log line of the request',
      () => {
        line = cluster.lines
          .filter((text) => text.includes(caller.traceId))
          .map((text) => JSON.parse(text) as { trace_id?: string; span_id?: string; service?: string })
          .find((parsed) => parsed.trace_id === caller.traceId);
        return Promise.resolve(line !== undefined);
      },
      10_000,
    );
    expect(line?.span_id).toMatch(/^[0-9a-f]{16}$/);
    expect(spanIds.has(line?.span_id ?? '')).toBe(true);
  });

  it("a problem document carries the request's trace id (trace_id), in the trace Jaeger keeps", async () => {
    const caller = callerContext();
    const response = await post({ text: '' }, caller.traceparent);
    expect(response.status).toBe(400);
    const problem = (await response.json()) as { type: string; trace_id?: string };
    expect(problem.trace_id).toBe(caller.traceId);
    const operation = only(await traceWith(caller.traceId, 'edge', 'createPost'), 'edge', 'createPost');
    // The problem's slug, the last segment of its type.
    const slug = problem.type.split('/').at(-1);
    expect(operation.attributes).toMatchObject({ 'agentroom.outcome': slug, 'error.type': slug });
  });

  it("an MCP tools/call with a traceparent in params._meta lands in the caller's trace, linked to the HTTP request's", async () => {
    const meta = callerContext();
    const header = callerContext();
    const response = await fetch(`${cluster.origin}/api/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
        // A hop in between (a proxy) traced the HTTP request on its own.
        traceparent: header.traceparent,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'room_read_posts', arguments: {}, _meta: { traceparent: meta.traceparent, tracestate: 'agentroom=test' } },
      }),
    });
    expect(response.status).toBe(200);
    const trace = await traceWith(meta.traceId, 'edge', 'listPosts');
    const tool = only(trace, 'edge', 'tools/call room_read_posts');
    expect(parentOf(tool)).toBe(meta.spanId);
    expect(tool.attributes).toMatchObject({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'room_read_posts' });
    // The operation and its calls to the services are the tool call's.
    expect(parentOf(only(trace, 'edge', 'listPosts'))).toBe(tool.spanId);
    const operation = only(trace, 'edge', 'listPosts');
    // Edge answers the first page from its memory once its live feed follows the room (the first test
    // opened one); any call it made to the room or the record is the operation's.
    const calls = trace.spans.filter((span) => span.service !== 'edge' && span.name.startsWith('grpc.'));
    for (const call of calls) {
      const client = trace.spans.find((span) => span.spanId === call.parentSpanId);
      expect(client?.parentSpanId).toBe(operation.spanId);
    }
    // The HTTP request stays in the header's trace, which the tool call links to.
    const http = await traceWith(header.traceId, 'edge', 'POST');
    const server = http.spans.find((span) => span.service === 'edge' && span.name === 'POST');
    expect(tool.links).toContainEqual({ traceId: header.traceId, spanId: server?.spanId });
  });

  it("a 2026-07-28 tools/call's _meta, beside the revision's own envelope, puts the tool call in the caller's trace too", async () => {
    const meta = callerContext();
    const response = await fetch(`${cluster.origin}/api/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN_REVISION,
        'mcp-method': 'tools/call',
        'mcp-name': 'room_read_posts',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'room_read_posts', arguments: {}, _meta: modernMeta({ traceparent: meta.traceparent }) },
      }),
    });
    expect(response.status).toBe(200);
    const tool = only(await traceWith(meta.traceId, 'edge', 'tools/call room_read_posts'), 'edge', 'tools/call room_read_posts');
    expect(parentOf(tool)).toBe(meta.spanId);
  });
});
