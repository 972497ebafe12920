// The router as its own process (cluster mode): edge replicas behind it, over HTTP.
import './node-version.js';
import { closeHttpServer, createLogger, exitOnSignal, exitOnStartupFailure, loadConfigOrExit, publicUrls, startMetricsServer } from '@agentroom/kit';
import { routerEnv } from './config.js';
import { endLiveStreams, startRouter } from './router.js';
import { resolveRoutes } from './routes.js';
import { discoveryDocuments } from './discovery.js';

const config = loadConfigOrExit(routerEnv, 'router');
const log = createLogger('router', config.LOG_LEVEL, config.LOG_FORMAT);
const urls = publicUrls(config);
try {
  const router = await startRouter({
    routes: resolveRoutes(urls),
    targets: { edge: { kind: 'remote', urls: config.EDGE_URLS }, auth: { kind: 'remote', urls: config.AUTH_URLS } },
    documents: discoveryDocuments(urls),
    quotaLimit: config.QUOTA_PER_ADDRESS,
    headersTimeoutMs: config.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: config.REQUEST_TIMEOUT_MS,
    port: config.PORT,
    log,
  });
  const metrics = config.METRICS_PORT === undefined ? undefined : await startMetricsServer(config.METRICS_PORT);
  // Started by `npm run cluster`: tell it that this process, not another one on PORT, is listening.
  if (process.send) process.send({ listening: router.port }, () => process.disconnect());
  exitOnSignal(log, async () => {
    endLiveStreams();
    await closeHttpServer(router.server, config.SHUTDOWN_GRACE_MS);
    if (metrics) await closeHttpServer(metrics.server, 1_000);
  });
} catch (error) {
  exitOnStartupFailure('router', error, log, { ports: { PORT: config.PORT, METRICS_PORT: config.METRICS_PORT } });
}
