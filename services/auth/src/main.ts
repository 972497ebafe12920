import { closeHttpServer, createLogger, exitOnSignal, loadConfigOrExit, startMetricsServer } from '@agentroom/kit';
import { authEnv, start } from './index.js';

const config = loadConfigOrExit(authEnv, 'auth');
const log = createLogger('auth', config.LOG_LEVEL);
const auth = await start(config, { listen: true, log });
const metrics = config.METRICS_PORT === undefined ? undefined : await startMetricsServer(config.METRICS_PORT);
exitOnSignal(log, async () => {
  await auth.stop();
  if (metrics) await closeHttpServer(metrics.server, 1_000);
});
