import { closeHttpServer, createLogger, exitOnSignal, loadConfigOrExit, startMetricsServer } from '@agentroom/kit';
import { messagingEnv, start } from './index.js';

const config = loadConfigOrExit(messagingEnv, 'messaging');
const log = createLogger('messaging', config.LOG_LEVEL);
const messaging = await start(config, log);
const metrics = config.METRICS_PORT === undefined ? undefined : await startMetricsServer(config.METRICS_PORT);
exitOnSignal(log, async () => {
  await messaging.stop();
  if (metrics) await closeHttpServer(metrics.server, 1_000);
});
