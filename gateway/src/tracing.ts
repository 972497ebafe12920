// Envoy's tracing from the standard OpenTelemetry variables the services read, so that one set of
// OTEL_* settings turns on every span of a request, Envoy's first one included (docs/decisions.md §50).
import { z } from 'zod';
import type { EnvoyTracing } from './envoy.js';

const blankIsUnset = (value: unknown): unknown => (typeof value === 'string' && value.trim() === '' ? undefined : value);

const otlpUrl = z.preprocess(
  blankIsUnset,
  z
    .url({ protocol: /^https?$/ })
    .refine((value) => new URL(value).protocol === 'http:', {
      message: 'Envoy sends its spans over plain HTTP: use an http:// receiver (a collector beside it, for instance)',
    })
    .optional(),
);

const protocol = z.preprocess(blankIsUnset, z.enum(['http/protobuf', 'http/json', 'grpc']).optional());

/** The OpenTelemetry SDK's own variables (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/) that decide Envoy's tracing. */
export const tracingEnv = z.object({
  OTEL_SDK_DISABLED: z.preprocess(blankIsUnset, z.enum(['true', 'false']).optional()),
  OTEL_TRACES_EXPORTER: z.preprocess(blankIsUnset, z.string().optional()),
  OTEL_EXPORTER_OTLP_ENDPOINT: otlpUrl,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlpUrl,
  OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: protocol,
  OTEL_TRACES_SAMPLER: z.preprocess(
    blankIsUnset,
    z.enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']).optional(),
  ),
  OTEL_TRACES_SAMPLER_ARG: z.preprocess(blankIsUnset, z.coerce.number().min(0).max(1).optional()),
});

export type TracingEnv = z.output<typeof tracingEnv>;

/** Whether the services export spans: as their SDK decides, an OTLP exporter named or an OTLP endpoint set, unless the SDK is disabled. */
export function tracesExported(env: TracingEnv): boolean {
  if (env.OTEL_SDK_DISABLED === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((name) => name.trim());
  if (exporters.includes('none')) return false;
  return exporters.includes('otlp') || env.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined;
}

/**
 * The share of new traces the sampler starts, as a percentage for Envoy's `random_sampling`: a ratio
 * sampler's OTEL_TRACES_SAMPLER_ARG (1 when absent), all or none for the others. The SDK's default is
 * `parentbased_always_on`. Envoy keeps the decision of a request that brings a `traceparent`, as the
 * `parentbased_` samplers do.
 */
export function samplingPercent(env: TracingEnv): number {
  const sampler = env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on';
  if (sampler.endsWith('always_on')) return 100;
  if (sampler.endsWith('always_off')) return 0;
  // Rounded so that a ratio of 0.1 is 10 %, not 10.000000000000002.
  return Math.round((env.OTEL_TRACES_SAMPLER_ARG ?? 1) * 100 * 1e6) / 1e6;
}

/** Envoy's tracing for these variables, or undefined when the services export no spans. */
export function envoyTracing(env: TracingEnv): EnvoyTracing | undefined {
  if (!tracesExported(env)) return undefined;
  const grpc = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL) === 'grpc';
  // As the SDK: the traces endpoint is the whole URL; the general one is a base, under which spans go to /v1/traces.
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT ?? (grpc ? 'http://localhost:4317' : 'http://localhost:4318');
  const tracesUrl = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? `${base.replace(/\/+$/, '')}/v1/traces`;
  const receiver = new URL(grpc ? (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? base) : tracesUrl);
  return {
    protocol: grpc ? 'grpc' : 'http/protobuf',
    // An IPv6 address comes bracketed in a URL, not in Envoy's socket address.
    host: receiver.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: receiver.port === '' ? 80 : Number(receiver.port),
    tracesUrl,
    samplingPercent: samplingPercent(env),
  };
}
