import { closeHttpServer, createLogger, exitOnSignal, exitOnStartupFailure, loadConfigOrExit, startMetricsServer } from '@agentroom/kit';
import { roomEnv, start } from './index.js';

const config = loadConfigOrExit(roomEnv, 'room');
const log = createLogger('room', config.LOG_LEVEL, config.LOG_FORMAT);
try {
  const room = await start(config, log);
  const metrics = config.METRICS_PORT === undefined ? undefined : await startMetricsServer(config.METRICS_PORT);
  exitOnSignal(log, async () => {
    await room.stop();
    if (metrics) await closeHttpServer(metrics.server, 1_000);
  });
} catch (error) {
  // A busy port, Redis unreachable…: one line that says what to do, and exit 1.
  exitOnStartupFailure('room', error, log, { ports: { METRICS_PORT: config.METRICS_PORT } });
}
