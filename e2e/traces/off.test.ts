import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServiceProcess } from '@agentroom/testkit';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * Tracing is off unless OTEL_* asks for it, and then not even loaded: a service process started
 * with a module hook of the test's (Node's `--import`) that writes down every OpenTelemetry module
 * the process resolves.
 */
describe('tracing off by default', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentroom-otel-off-'));
  const hook = join(dir, 'resolved.mjs');
  writeFileSync(
    hook,
    `import { appendFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
registerHooks({
  resolve(specifier, context, next) {
    const resolved = next(specifier, context);
    if (resolved.url.includes('/@opentelemetry/')) appendFileSync(process.env.RESOLVED_OUT, resolved.url + '\\n');
    return resolved;
  },
});
`,
  );

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The OpenTelemetry packages a room process resolved by the time it served, with `env` added. */
  const resolvedBy = async (name: string, env: Record<string, string>): Promise<string[]> => {
    const out = join(dir, `${name}.txt`);
    writeFileSync(out, '');
    const room = await startServiceProcess({
      service: 'room',
      addressVariable: 'ROOM_GRPC_ADDR',
      env: { ...env, NODE_OPTIONS: `--import=${hook}`, RESOLVED_OUT: out },
    });
    await room.stop();
    return [
      ...new Set(
        readFileSync(out, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((url) => /\/node_modules\/(@opentelemetry\/[^/]+)\//.exec(url)?.[1] ?? url),
      ),
    ];
  };

  it('without OTEL_* no SDK package is loaded (the API alone, whose calls do nothing); with them, the SDK and its instrumentations are', async () => {
    const off = await resolvedBy('off', {});
    expect(off).toEqual(['@opentelemetry/api']);
    // Turned off by the specification's kill switch, even with an endpoint set.
    expect(await resolvedBy('disabled', { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' })).toEqual(['@opentelemetry/api']);
    const on = await resolvedBy('on', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
    expect(on).toEqual(expect.arrayContaining(['@opentelemetry/sdk-node', '@opentelemetry/instrumentation-grpc', '@opentelemetry/instrumentation-ioredis']));
  });
});
