// @agentroom/kit/telemetry: OpenTelemetry traces of a service process, off unless the standard OTEL_* variables ask for them (docs/observability.md, Traces).
import { z } from 'zod';
import { loadConfigOrExit } from './config.js';

export * from './trace.js';

/** An unset variable and an empty one mean the same: a chart or a shell that sets `X=` asks for the default. */
function optional<T extends z.ZodType>(schema: T) {
  return z.preprocess((value) => (typeof value === 'string' && value.trim() === '' ? undefined : value), schema.optional());
}

const OTLP_PROTOCOLS = ['http/protobuf', 'http/json', 'grpc'] as const;

/** The samplers the SDK reads from OTEL_TRACES_SAMPLER (the specification's names). */
export const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;

/**
 * The OTEL_* variables a process reads, checked before anything starts (the SDK itself would only
 * warn on a typo and go on without traces). The SDK reads them again from the environment: this
 * schema says which values we accept and whether tracing is on, nothing more.
 */
export const telemetryEnv = z.object({
  /** `true` turns tracing off whatever else is set (the specification's kill switch). */
  OTEL_SDK_DISABLED: optional(z.enum(['true', 'false', 'TRUE', 'FALSE', 'True', 'False'])).transform((value) => value?.toLowerCase() === 'true'),
  /** `otlp` turns tracing on (to the default endpoint, http://localhost:4318, when none is set); `none` off. */
  OTEL_TRACES_EXPORTER: optional(z.enum(['otlp', 'none'])),
  /** The collector's base URL (`/v1/traces` is appended for HTTP); setting it turns tracing on. */
  OTEL_EXPORTER_OTLP_ENDPOINT: optional(z.url({ protocol: /^https?$/ })),
  /** The full URL spans are sent to; setting it turns tracing on. */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optional(z.url({ protocol: /^https?$/ })),
  OTEL_EXPORTER_OTLP_PROTOCOL: optional(z.enum(OTLP_PROTOCOLS)).default('http/protobuf'),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: optional(z.enum(OTLP_PROTOCOLS)),
  /** `service.name` of every span; by default the service's own (`edge`, `room`, ...). */
  OTEL_SERVICE_NAME: optional(z.string().trim().min(1).max(128)),
  /** Which traces are kept; the SDK's default is `parentbased_always_on`. */
  OTEL_TRACES_SAMPLER: optional(z.enum(SAMPLERS)),
  /** The ratio of a `traceidratio` sampler, from 0 to 1. */
  OTEL_TRACES_SAMPLER_ARG: optional(z.coerce.number().min(0).max(1)),
  /** `key=value,...` added to every span's resource (the SDK parses them). */
  OTEL_RESOURCE_ATTRIBUTES: optional(z.string()),
});

export type TelemetryConfig = z.output<typeof telemetryEnv>;

/** Tracing is on when an exporter or an endpoint is asked for, and the kill switch is not set. */
export function tracingEnabled(config: TelemetryConfig): boolean {
  if (config.OTEL_SDK_DISABLED || config.OTEL_TRACES_EXPORTER === 'none') return false;
  return config.OTEL_TRACES_EXPORTER === 'otlp' || config.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined || config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined;
}

/** The packages whose imports the ESM hook intercepts: those the instrumentations below patch, and nothing else. */
const INSTRUMENTED_MODULES = ['http', 'https', 'node:http', 'node:https', 'express', '@grpc/grpc-js', 'ioredis', 'pg', 'pg-pool'];

/** Paths of the admin port (ADMIN_PORT) that a scraper or a kubelet asks every few seconds: no trace of their own. */
const PROBE_PATHS = new Set(['/metrics', '/livez', '/readyz']);

let running: { shutdown(): Promise<void> } | undefined;

/**
 * Starts OpenTelemetry's Node SDK for this process when the OTEL_* variables turn tracing on, and
 * answers whether it did. Off, it loads none of the SDK's packages. Call it before importing the
 * modules that load express, gRPC, ioredis or pg, so their instrumentations patch them as they load
 * (docs/decisions.md §49). A bad variable ends the process with one line, as every other setting does.
 */
export async function startTelemetry(service: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const config = loadConfigOrExit(telemetryEnv, service, env);
  if (running || !tracingEnabled(config)) return running !== undefined;
  // ESM imports of CommonJS packages (express, ioredis, @grpc/grpc-js, pg) and of node:http pass no
  // `require` for require-in-the-middle to see: Node's in-thread module hooks, limited to the
  // instrumented packages, let import-in-the-middle hand them to the instrumentations.
  const { register } = await import('import-in-the-middle/register-hooks.mjs');
  register({ include: INSTRUMENTED_MODULES });
  const [
    { NodeSDK },
    { HttpInstrumentation },
    { ExpressInstrumentation, ExpressLayerType },
    { GrpcInstrumentation },
    { IORedisInstrumentation },
    { PgInstrumentation },
  ] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-express'),
    import('@opentelemetry/instrumentation-grpc'),
    import('@opentelemetry/instrumentation-ioredis'),
    import('@opentelemetry/instrumentation-pg'),
  ]);
  const sdk = new NodeSDK({
    serviceName: config.OTEL_SERVICE_NAME ?? service,
    // Traces only: metrics stay Prometheus' (/metrics), logs stay on stdout with the trace id in them.
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({ ignoreIncomingRequestHook: (request) => PROBE_PATHS.has((request.url ?? '').split('?')[0] ?? '') }),
      // Each middleware a span of its own says little; the route's handler and the HTTP span's route say what was asked.
      new ExpressInstrumentation({ ignoreLayersType: [ExpressLayerType.MIDDLEWARE] }),
      new GrpcInstrumentation({ ignoreGrpcMethods: ['Check', 'Watch'] }),
      // Background loops (an XREAD that waits, a lease renewal) make no trace of their own; within a request's or a job's span they do.
      // The statement is the command's name only: a post's words or a token never reach a span.
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
      new PgInstrumentation({ requireParentSpan: true }),
    ],
  });
  sdk.start();
  running = sdk;
  return true;
}

/** Sends the spans still buffered and stops the SDK; nothing when tracing is off. The lifecycle calls it last at shutdown. */
export async function stopTelemetry(): Promise<void> {
  const sdk = running;
  running = undefined;
  await sdk?.shutdown();
}
