// A real trace backend for the trace tests: Jaeger v2 all-in-one (built by scripts/install-tools.sh),
// keeping traces in memory, receiving OTLP over HTTP and answering its HTTP query API on loopback.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@agentroom/kit/local';
import { z } from 'zod';
import { goTool } from './go-tools.js';

const READY_TIMEOUT_MS = 20_000;

/** An OTLP attribute value as Jaeger's API v3 answers it (OTLP/JSON: 64-bit integers as strings). */
const valueSchema = z.object({
  stringValue: z.string().optional(),
  boolValue: z.boolean().optional(),
  intValue: z.union([z.string(), z.number()]).optional(),
  doubleValue: z.number().optional(),
});

const attributesSchema = z.array(z.object({ key: z.string(), value: valueSchema })).default([]);

const spanSchema = z.object({
  traceId: z.string(),
  spanId: z.string(),
  parentSpanId: z.string().optional(),
  name: z.string(),
  kind: z.number().optional(),
  startTimeUnixNano: z.string(),
  endTimeUnixNano: z.string(),
  attributes: attributesSchema,
  links: z.array(z.object({ traceId: z.string(), spanId: z.string() })).default([]),
  status: z.object({ code: z.number().optional(), message: z.string().optional() }).default({}),
});

/** One chunk of `/api/v3/traces…`: OTLP/JSON's TracesData under `result`. */
const chunkSchema = z.object({
  result: z.object({
    resourceSpans: z
      .array(
        z.object({
          resource: z.object({ attributes: attributesSchema }),
          scopeSpans: z.array(z.object({ spans: z.array(spanSchema).default([]) })).default([]),
        }),
      )
      .default([]),
  }),
});

/** One span as OTLP has it (API v3): its parent and its links apart, which Jaeger's older API merges. */
export interface JaegerSpan {
  traceId: string;
  spanId: string;
  /** Undefined on a trace's root. */
  parentSpanId: string | undefined;
  name: string;
  /** `service.name` of the process that made the span. */
  service: string;
  /** The span's attributes by key, integers as numbers. */
  attributes: Record<string, string | number | boolean | undefined>;
  links: { traceId: string; spanId: string }[];
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
}

export interface JaegerTrace {
  traceId: string;
  spans: JaegerSpan[];
}

function valueOf(value: z.output<typeof valueSchema>): string | number | boolean | undefined {
  if (value.intValue !== undefined) return Number(value.intValue);
  return value.stringValue ?? value.boolValue ?? value.doubleValue;
}

/** The spans of an API v3 answer (newline-delimited chunks), grouped by trace. */
function tracesOf(text: string): JaegerTrace[] {
  const traces = new Map<string, JaegerSpan[]>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const chunk = chunkSchema.safeParse(JSON.parse(line));
    if (!chunk.success) continue;
    for (const resourceSpans of chunk.data.result.resourceSpans) {
      const service = String(valueOf(resourceSpans.resource.attributes.find((a) => a.key === 'service.name')?.value ?? {}) ?? '?');
      for (const span of resourceSpans.scopeSpans.flatMap((scope) => scope.spans)) {
        const spans = traces.get(span.traceId) ?? [];
        traces.set(span.traceId, spans);
        spans.push({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId === '' ? undefined : span.parentSpanId,
          name: span.name,
          service,
          attributes: Object.fromEntries(span.attributes.map((attribute) => [attribute.key, valueOf(attribute.value)])),
          links: span.links,
          statusCode: span.status.code ?? 0,
        });
      }
    }
  }
  return [...traces].map(([traceId, spans]) => ({ traceId, spans }));
}

export interface Jaeger {
  /** Where services send spans: the value of `OTEL_EXPORTER_OTLP_ENDPOINT` (OTLP over HTTP, `/v1/traces` appended by the SDK). */
  otlpEndpoint: string;
  /** Jaeger's HTTP query API and UI, `http://127.0.0.1:<port>`. */
  queryUrl: string;
  /** The traces Jaeger holds with a span of `service` (most recent first, at most `limit`). */
  traces(service: string, limit?: number): Promise<JaegerTrace[]>;
  /** One trace by its id (32 hex digits); undefined while Jaeger holds none of its spans. */
  trace(traceId: string): Promise<JaegerTrace | undefined>;
  stop(): Promise<void>;
}

/** The all-in-one configuration, cut to what tests use: OTLP/HTTP in, memory store, query API, health check. */
function config(ports: { otlp: number; query: number; health: number }): string {
  return `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: []
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:${ports.health}
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:${ports.query}
    grpc:
      endpoint: 127.0.0.1:0
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${ports.otlp}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`;
}

/**
 * Starts Jaeger (`goTool('jaeger')`) on free loopback ports and resolves once its health check and
 * query API answer. Spans reach its store a moment after a service exports them: poll with `until`.
 * Traces are read through its API v3 (OTLP/JSON), which keeps a span's parent and links apart.
 */
export async function startJaeger(): Promise<Jaeger> {
  const ports = { otlp: await freePort(), query: await freePort(), health: await freePort() };
  const dir = mkdtempSync(join(tmpdir(), 'agentroom-jaeger-'));
  const file = join(dir, 'jaeger.yaml');
  writeFileSync(file, config(ports));
  const output: string[] = [];
  const child: ChildProcess = spawn(goTool('jaeger'), ['--config', `file:${file}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  let exited = false;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void gone.then(() => (exited = true));
  const queryUrl = `http://127.0.0.1:${ports.query}`;

  const stop = async (): Promise<void> => {
    if (!exited) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await gone;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (exited) throw new Error(`jaeger exited before it was ready: ${output.join('').slice(-2_000)}`);
    const ok = async (url: string): Promise<boolean> => (await fetch(url, { signal: AbortSignal.timeout(1_000) }).catch(() => undefined))?.ok === true;
    if ((await ok(`http://127.0.0.1:${ports.health}/status`)) && (await ok(`${queryUrl}/api/services`))) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`jaeger was not ready within ${READY_TIMEOUT_MS / 1000} s: ${output.join('').slice(-2_000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const query = async (path: string): Promise<JaegerTrace[]> => {
    const response = await fetch(`${queryUrl}${path}`, { signal: AbortSignal.timeout(5_000) });
    if (response.status === 404) return [];
    if (!response.ok) throw new Error(`jaeger ${path}: ${response.status} ${await response.text()}`);
    return tracesOf(await response.text());
  };

  return {
    otlpEndpoint: `http://127.0.0.1:${ports.otlp}`,
    queryUrl,
    traces: (service, limit = 100) => {
      const now = Date.now();
      const window = new URLSearchParams({
        'query.service_name': service,
        'query.start_time_min': new Date(now - 3_600_000).toISOString(),
        'query.start_time_max': new Date(now + 60_000).toISOString(),
        'query.num_traces': String(limit),
      });
      return query(`/api/v3/traces?${window}`);
    },
    trace: async (traceId) => (await query(`/api/v3/traces/${traceId}`))[0],
    stop,
  };
}
