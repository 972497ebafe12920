import { closeHttpServer, createLogger, exitOnSignal, exitOnStartupFailure, loadConfigOrExit, startMetricsServer } from '@agentroom/kit';
import { edgeEnv, start } from './index.js';

const config = loadConfigOrExit(edgeEnv, 'edge');
const log = createLogger('edge', config.LOG_LEVEL, config.LOG_FORMAT);
try {
  const edge = await start(config, { listen: true, log });
  const metrics = config.METRICS_PORT === undefined ? undefined : await startMetricsServer(config.METRICS_PORT);
  exitOnSignal(log, async () => {
    await edge.stop();
    if (metrics) await closeHttpServer(metrics.server, 1_000);
  });
} catch (error) {
  // A busy port, Redis unreachable…: one line that says what to do, and exit 1.
  exitOnStartupFailure('edge', error, log, { ports: { EDGE_PORT: config.EDGE_PORT, METRICS_PORT: config.METRICS_PORT } });
}
