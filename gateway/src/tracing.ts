// Envoy's tracing from the standard OpenTelemetry variables the services read, so that one set of
// OTEL_* settings turns on every span of a request, Envoy's first one included (docs/decisions.md §50).
import { telemetryEnv, tracingEnabled } from '@agentroom/kit/telemetry';
import { z } from 'zod';
import type { EnvoyTracing } from './envoy.js';

const blankIsUnset = (value: unknown): unknown => (typeof value === 'string' && value.trim() === '' ? undefined : value);

/** An OTLP receiver Envoy can send to: the URL the services take, over plain HTTP. */
const otlpUrl = z.preprocess(
  blankIsUnset,
  z
    .url({ protocol: /^https?$/ })
    .refine((value) => new URL(value).protocol === 'http:', {
      message: 'Envoy sends its spans over plain HTTP: use an http:// receiver (a collector beside it, for instance)',
    })
    .optional(),
);

/**
 * The OpenTelemetry SDK's variables as the services read them (kit's telemetryEnv), with the
 * receivers Envoy can reach: one set of OTEL_* settings for Envoy and every process.
 */
export const tracingEnv = telemetryEnv.extend({ OTEL_EXPORTER_OTLP_ENDPOINT: otlpUrl, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlpUrl });

export type TracingEnv = z.output<typeof tracingEnv>;

/** Whether the services export spans, as their SDK decides (an OTLP exporter or endpoint, unless disabled). */
export function tracesExported(env: TracingEnv): boolean {
  return tracingEnabled(env);
}

/**
 * The share of new traces the sampler starts, in millionths, for Envoy's trace id ratio sampler: a
 * ratio sampler's OTEL_TRACES_SAMPLER_ARG (1 when absent), all or none for the others (the SDK's
 * default is `parentbased_always_on`). Envoy's sampler is parent-based whatever the variable says:
 * a request that brings a `traceparent` keeps its decision, as the services' `parentbased_` do.
 */
export function samplingPerMillion(env: TracingEnv): number {
  const sampler = env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on';
  if (sampler.endsWith('always_on')) return 1_000_000;
  if (sampler.endsWith('always_off')) return 0;
  return Math.round((env.OTEL_TRACES_SAMPLER_ARG ?? 1) * 1_000_000);
}

/** Envoy's tracing for these variables, or undefined when the services export no spans. */
export function envoyTracing(env: TracingEnv): (EnvoyTracing & { port: number; samplingPerMillion: number }) | undefined {
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
    samplingPerMillion: samplingPerMillion(env),
  };
}
