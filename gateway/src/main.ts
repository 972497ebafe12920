// The router as its own process (cluster mode): edge replicas behind it, over HTTP.
import { closeHttpServer, createLogger, exitOnSignal, loadConfigOrExit, publicUrls, startMetricsServer } from '@agentroom/kit';
import { routerEnv } from './config.js';
import { endLiveStreams, startRouter } from './router.js';
import { resolveRoutes } from './routes.js';
import { discoveryDocuments } from './discovery.js';

const config = loadConfigOrExit(routerEnv, 'router');
const log = createLogger('router', config.LOG_LEVEL);
const urls = publicUrls(config);
const router = await startRouter({
  routes: resolveRoutes(urls),
  targets: { edge: { kind: 'remote', urls: config.EDGE_URLS }, auth: { kind: 'remote', urls: config.AUTH_URLS } },
  documents: discoveryDocuments(urls),
  port: config.PORT,
  log,
});
const metrics = config.METRICS_PORT === undefined ? undefined : await startMetricsServer(config.METRICS_PORT);
exitOnSignal(log, async () => {
  endLiveStreams();
  await closeHttpServer(router.server, config.SHUTDOWN_GRACE_MS);
  if (metrics) await closeHttpServer(metrics.server, 1_000);
});
