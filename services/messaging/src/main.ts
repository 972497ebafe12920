import { loadConfigOrExit } from '@agentroom/kit/config';
import { createLogger } from '@agentroom/kit/log';
import { exitOnStartupFailure, runUntilSignal } from '@agentroom/kit/process';
import { startTelemetry } from '@agentroom/kit/telemetry';

// Tracing (when OTEL_* turns it on) starts before the service's modules load: its instrumentations
// patch express, gRPC, ioredis and pg as they are imported (docs/decisions.md §49).
await startTelemetry('messaging');
const { messagingEnv, start } = await import('./index.js');

const config = loadConfigOrExit(messagingEnv, 'messaging');
const log = createLogger('messaging', config.LOG_LEVEL, config.LOG_FORMAT);
try {
  await runUntilSignal(await start(config, log), config, log);
} catch (error) {
  // A busy port, Redis unreachable…: one line that says what to do, and exit 1.
  exitOnStartupFailure('messaging', error, log, { ports: { ADMIN_PORT: config.ADMIN_PORT } });
}
