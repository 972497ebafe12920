import { closeHttpServer, createLogger, exitOnSignal, exitOnStartupFailure, loadConfigOrExit, startMetricsServer } from '@agentroom/kit';
import { authEnv, start } from './index.js';

const config = loadConfigOrExit(authEnv, 'auth');
const log = createLogger('auth', config.LOG_LEVEL, config.LOG_FORMAT);
try {
  const auth = await start(config, { listen: true, log });
  const metrics = config.METRICS_PORT === undefined ? undefined : await startMetricsServer(config.METRICS_PORT);
  exitOnSignal(log, async () => {
    await auth.stop();
    if (metrics) await closeHttpServer(metrics.server, 1_000);
  });
} catch (error) {
  // A busy port, Redis unreachable…: one line that says what to do, and exit 1.
  exitOnStartupFailure('auth', error, log, { ports: { AUTH_HTTP_PORT: config.AUTH_HTTP_PORT, METRICS_PORT: config.METRICS_PORT } });
}
