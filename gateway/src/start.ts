// `npm start`: the room at http://localhost:8080 with no setup.
import { closeHttpServer, createLogger, exitOnSignal, loadConfigOrExit, startMetricsServer } from '@agentroom/kit';
import { embeddedEnv } from './config.js';
import { startEmbedded } from './embedded.js';

const config = loadConfigOrExit(embeddedEnv, 'agent-room');
const log = createLogger('gateway', config.LOG_LEVEL);
try {
  const running = await startEmbedded(process.env, log);
  const metrics = config.METRICS_PORT === undefined ? undefined : await startMetricsServer(config.METRICS_PORT);
  log.info(
    { site: running.urls.siteUrl, api: running.urls.baseUrl, storage: running.storage, metricsPort: metrics?.port },
    running.storage === 'memory'
      ? `Agent Room is running at ${running.urls.siteUrl} (in-memory storage: data is lost on exit; set REDIS_URL for Redis)`
      : `Agent Room is running at ${running.urls.siteUrl} (Redis storage)`,
  );
  exitOnSignal(log, async () => {
    await running.stop();
    if (metrics) await closeHttpServer(metrics.server, 1_000);
  });
} catch (error) {
  log.fatal({ err: error }, `Agent Room could not start: ${(error as Error).message}`);
  process.exit(1);
}
