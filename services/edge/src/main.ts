import { closeHttpServer, createLogger, exitOnSignal, loadConfigOrExit, startMetricsServer } from '@agentroom/kit';
import { edgeEnv, start } from './index.js';

const config = loadConfigOrExit(edgeEnv, 'edge');
const log = createLogger('edge', config.LOG_LEVEL);
const edge = await start(config, { listen: true, log });
const metrics = config.METRICS_PORT === undefined ? undefined : await startMetricsServer(config.METRICS_PORT);
exitOnSignal(log, async () => {
  await edge.stop();
  if (metrics) await closeHttpServer(metrics.server, 1_000);
});
