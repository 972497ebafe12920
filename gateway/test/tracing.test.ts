import { describe, expect, it } from 'vitest';
import { envoyTracing, tracingEnv } from '../src/tracing.js';

const tracingOf = (env: Record<string, string>) => envoyTracing(tracingEnv.parse(env));

describe("Envoy's tracing from the OTEL_* variables the services read", () => {
  it('is off unless the services export spans: an OTLP endpoint or exporter named, and the SDK not disabled', () => {
    expect(tracingOf({})).toBeUndefined();
    expect(tracingOf({ OTEL_TRACES_SAMPLER: 'always_on' })).toBeUndefined();
    expect(tracingOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(tracingOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
    expect(tracingOf({ OTEL_EXPORTER_OTLP_ENDPOINT: '' })).toBeUndefined();
    // The SDK's default receiver, on this machine.
    expect(tracingOf({ OTEL_TRACES_EXPORTER: 'otlp' })).toEqual({
      protocol: 'http/protobuf',
      host: 'localhost',
      port: 4318,
      tracesUrl: 'http://localhost:4318/v1/traces',
      samplingPerMillion: 1_000_000,
    });
  });

  it('sends spans where the SDK sends them: below the base endpoint, or to the traces endpoint as it is; over gRPC to the receiver', () => {
    expect(tracingOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector.observability:4318/otlp/' })).toMatchObject({
      host: 'collector.observability',
      port: 4318,
      tracesUrl: 'http://collector.observability:4318/otlp/v1/traces',
    });
    expect(tracingOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:1', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://10.0.0.7:9000/spans' })).toMatchObject({
      host: '10.0.0.7',
      port: 9000,
      tracesUrl: 'http://10.0.0.7:9000/spans',
    });
    expect(tracingOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toMatchObject({
      protocol: 'grpc',
      host: 'collector',
      port: 80,
    });
    expect(tracingOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://[::1]:4317', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' })).toMatchObject({
      protocol: 'grpc',
      host: '::1',
      port: 4317,
    });
  });

  it("samples new traces at the sampler's ratio, in millionths; all or none for the other samplers", () => {
    const percent = (sampler: string, arg?: string) =>
      tracingOf({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_TRACES_SAMPLER: sampler, ...(arg === undefined ? {} : { OTEL_TRACES_SAMPLER_ARG: arg }) })
        ?.samplingPerMillion;
    expect(percent('parentbased_traceidratio', '0.1')).toBe(100_000);
    expect(percent('traceidratio', '0.005')).toBe(5_000);
    expect(percent('parentbased_traceidratio', '0.0000004')).toBe(0);
    expect(percent('parentbased_traceidratio')).toBe(1_000_000);
    expect(percent('always_on', '0.1')).toBe(1_000_000);
    expect(percent('parentbased_always_off')).toBe(0);
  });

  it('refuses what Envoy cannot follow, before anything starts: a receiver over HTTPS, a ratio out of 0..1, an unknown sampler', () => {
    const issues = (env: Record<string, string>) => tracingEnv.safeParse(env).error?.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    expect(issues({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector:4318' })).toEqual([expect.stringMatching(/^OTEL_EXPORTER_OTLP_ENDPOINT: .*plain HTTP/)]);
    expect(issues({ OTEL_TRACES_SAMPLER_ARG: '10' })).toEqual([expect.stringMatching(/^OTEL_TRACES_SAMPLER_ARG: /)]);
    expect(issues({ OTEL_TRACES_SAMPLER: 'jaeger_remote' })).toEqual([expect.stringMatching(/^OTEL_TRACES_SAMPLER: /)]);
  });
});
