// `npm start`: the room at http://localhost:8080 with no setup.
import '@agentroom/gateway/node-version';
import { setFlagsFromString } from 'node:v8';
import { assertPortFree, closeHttpServer, createLogger, exitOnSignal, exitOnStartupFailure, loadConfigOrExit, startAdminServer } from '@agentroom/kit';
import { embeddedEnv } from './config.js';
import { startEmbedded } from './embedded.js';

// V8 lets its heap grow to up to four times what survived its last full collection when the
// machine has memory to spare: under a steady stream of posts, this process then held four to five
// times what its data needed. Growing by a fifth between collections keeps it near its data, for a
// little more time collecting (docs/decisions.md §19). A --heap-growing-percent given to node wins.
if (!process.execArgv.some((arg) => arg.startsWith('--heap-growing-percent'))) setFlagsFromString('--heap-growing-percent=20');

const config = loadConfigOrExit(embeddedEnv, 'Agent Room');
const log = createLogger('gateway', config.LOG_LEVEL, config.LOG_FORMAT);
const ports = { PORT: config.PORT, ADMIN_PORT: config.ADMIN_PORT };
try {
  // A busy PORT fails here, before any service has started or logged.
  await assertPortFree(config.PORT);
  const running = await startEmbedded(process.env, log);
  const admin = config.ADMIN_PORT === undefined ? undefined : await startAdminServer(config.ADMIN_PORT, '0.0.0.0', running.probes);
  // Before the line that says it runs: from then on a SIGTERM stops it gracefully. It stops with the
  // process that started it too (npm, a test), however that one died.
  exitOnSignal(
    log,
    async () => {
      await running.stop();
      if (admin) await closeHttpServer(admin.server, 1_000);
    },
    'channel-or-ppid',
  );
  log.info(
    { site: running.urls.siteUrl, api: running.urls.baseUrl, storage: running.storage, adminPort: admin?.port },
    running.storage === 'memory'
      ? `Agent Room is running at ${running.urls.siteUrl} (in-memory storage: data is lost on exit; set REDIS_URL for Redis)`
      : `Agent Room is running at ${running.urls.siteUrl} (Redis storage)`,
  );
  // A setting meant for tests and private deployments is said out loud, not only in a service's log.
  if (process.env.WEBHOOKS_ALLOW_PRIVATE_TARGETS === 'true') {
    log.warn('WEBHOOKS_ALLOW_PRIVATE_TARGETS is on: webhooks may target http, loopback and private addresses (meant for tests and private deployments)');
  }
} catch (error) {
  // Port in use, Redis unreachable or refusing: one line that says what to do, exit 1. A bug keeps its stack.
  exitOnStartupFailure('Agent Room', error, log, { ports });
}
