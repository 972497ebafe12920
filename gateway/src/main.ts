// The router as its own process (cluster mode): edge replicas behind it, over HTTP.
import './node-version.js';
import { loadConfigOrExit, publicUrls } from '@agentroom/kit/config';
import { createLogger } from '@agentroom/kit/log';
import { closeHttpServer, exitOnStartupFailure, leaveKeepAlive, runUntilSignal } from '@agentroom/kit/process';
import { startTelemetry } from '@agentroom/kit/telemetry';
import { routerEnv } from './config.js';

// Tracing (when OTEL_* turns it on) starts before the router's modules load, so that its calls to
// edge and auth over node:http are patched and carry the trace on (docs/decisions.md §49).
await startTelemetry('router');
const { endLiveStreams, startRouter } = await import('./router.js');
const { resolveRoutes } = await import('./routes.js');
const { discoveryDocuments } = await import('./discovery.js');

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
  // The router has no dependency of its own to be ready for: a dead upstream is its answer's business (503).
  await runUntilSignal(
    {
      dependencies: [],
      drain: () => leaveKeepAlive(router.server),
      async stop() {
        endLiveStreams();
        await closeHttpServer(router.server, config.SHUTDOWN_GRACE_MS);
      },
    },
    config,
    log,
  );
  // Started by `npm run cluster`: tell it that this process, not another one on PORT, is listening.
  // The channel stays open: its close is how this process learns that the launcher is gone.
  if (process.send) process.send({ listening: router.port });
} catch (error) {
  exitOnStartupFailure('router', error, log, { ports: { PORT: config.PORT, ADMIN_PORT: config.ADMIN_PORT } });
}
