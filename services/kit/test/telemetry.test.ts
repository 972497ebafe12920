import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { DomainError, problemDocument } from '../src/problems.js';
import { activeTraceIds, linkTo, startTelemetry, telemetryEnv, traceCarrier, tracingEnabled } from '../src/telemetry.js';

const enabled = (env: NodeJS.ProcessEnv): boolean => tracingEnabled(loadConfig(telemetryEnv, env));

describe('tracing configuration (the standard OTEL_* variables)', () => {
  it('is off by default, and with only a sampler, a protocol or resource attributes', () => {
    expect(enabled({})).toBe(false);
    expect(enabled({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' })).toBe(false);
    expect(enabled({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod' })).toBe(false);
  });

  it('is on with the otlp exporter, or an endpoint for all signals or for traces', () => {
    expect(enabled({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(enabled({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(enabled({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
  });

  it('is off with OTEL_SDK_DISABLED=true (any case) or the none exporter, whatever else is set', () => {
    expect(enabled({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(false);
    expect(enabled({ OTEL_SDK_DISABLED: 'TRUE', OTEL_TRACES_EXPORTER: 'otlp' })).toBe(false);
    expect(enabled({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(false);
    expect(enabled({ OTEL_SDK_DISABLED: 'false', OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
  });

  it('takes an empty variable as unset, and http/protobuf as the protocol by default', () => {
    const config = loadConfig(telemetryEnv, { OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_TRACES_EXPORTER: ' ', OTEL_SERVICE_NAME: '' });
    expect(tracingEnabled(config)).toBe(false);
    expect(config.OTEL_EXPORTER_OTLP_PROTOCOL).toBe('http/protobuf');
    expect(config.OTEL_SERVICE_NAME).toBeUndefined();
  });

  it('refuses, one line each, what the SDK would only warn about and ignore', () => {
    for (const env of [
      { OTEL_TRACES_EXPORTER: 'jaeger' },
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'http' },
      { OTEL_TRACES_SAMPLER: 'ratio' },
      { OTEL_TRACES_SAMPLER_ARG: '10' },
      { OTEL_SDK_DISABLED: 'yes' },
    ]) {
      expect(() => loadConfig(telemetryEnv, env), JSON.stringify(env)).toThrow(ConfigError);
    }
    expect(() => loadConfig(telemetryEnv, { OTEL_TRACES_SAMPLER_ARG: '10' })).toThrow(/OTEL_TRACES_SAMPLER_ARG="10"/);
  });
});

describe('tracing off', () => {
  it('starts nothing, and every helper finds no span: no ids for a log line or a problem, nothing to carry, nothing to link', async () => {
    expect(await startTelemetry('room', {})).toBe(false);
    expect(activeTraceIds()).toBeUndefined();
    expect(traceCarrier()).toEqual({});
    expect(linkTo(undefined)).toEqual([]);
    expect(linkTo({ traceparent: 'not-a-traceparent' })).toEqual([]);
    expect(problemDocument(new DomainError('internal'), 'https://room.example', 'Try again.')).not.toHaveProperty('trace_id');
  });
});
