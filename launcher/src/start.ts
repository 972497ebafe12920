// `npm start`: the room at http://localhost:8080 with no setup.
import '@agentroom/gateway/node-version';
import { setFlagsFromString } from 'node:v8';
import { loadConfigOrExit } from '@agentroom/kit/config';
import { createLogger, quietStartup } from '@agentroom/kit/log';
import { assertPortFree, closeHttpServer, exitOnSignal, exitOnStartupFailure, startAdminServer } from '@agentroom/kit/process';
import { startTelemetry } from '@agentroom/kit/telemetry';

// One SDK for the whole process, `service.name` agent-room (OTEL_SERVICE_NAME names it otherwise),
// started before the services' modules load so that their libraries are patched (docs/decisions.md §49):
// this file's own modules too, since the configuration's schemas come from the gateway and the record.
await startTelemetry('agent-room');
const { banner } = await import('./banner.js');
const { embeddedEnv } = await import('./config.js');
const { seedDemo } = await import('./demo.js');
const { startEmbedded } = await import('./embedded.js');

// V8 lets its heap grow to up to four times what survived its last full collection when the
// machine has memory to spare: under a steady stream of posts, this process then held four to five
// times what its data needed. Growing by a fifth between collections keeps it near its data, for a
// little more time collecting (docs/decisions.md §19). A --heap-growing-percent given to node wins.
if (!process.execArgv.some((arg) => arg.startsWith('--heap-growing-percent'))) setFlagsFromString('--heap-growing-percent=20');

const config = loadConfigOrExit(embeddedEnv, 'Agent Room');
// `npm run demo` (`npm start -- --demo`): a demo human whose password is printed, so never on a store that outlives the process.
const demo = process.argv.includes('--demo');
if (demo && config.REDIS_URL !== undefined) {
  process.stderr.write(
    'Agent Room could not start: the demo runs on in-memory storage only (it makes a human whose password it prints): unset REDIS_URL, or run npm start\n',
  );
  process.exit(1);
}
// In a terminal, the services' start-up lines give way to the block of addresses below; JSON logs keep every line.
const quiet = config.LOG_FORMAT === 'pretty' ? quietStartup() : undefined;
const output = quiet?.output ?? config.LOG_FORMAT;
const log = createLogger('gateway', config.LOG_LEVEL, output);
const ports = { PORT: config.PORT, ADMIN_PORT: config.ADMIN_PORT };
try {
  // A busy PORT fails here, before any service has started or logged.
  await assertPortFree(config.PORT);
  const running = await startEmbedded(process.env, log, { output });
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
  const seeded = demo ? await seedDemo(running) : undefined;
  const privateWebhooks = process.env.WEBHOOKS_ALLOW_PRIVATE_TARGETS === 'true';
  log.info(
    {
      site: running.urls.siteUrl,
      api: running.urls.baseUrl,
      storage: running.storage,
      record: running.record,
      recordPort: running.recordPort,
      adminPort: admin?.port,
      demo: seeded?.human,
    },
    running.storage === 'memory'
      ? `Agent Room is running at ${running.urls.siteUrl} (in-memory storage: data is lost on exit; set REDIS_URL for Redis)`
      : `Agent Room is running at ${running.urls.siteUrl} (Redis storage)`,
  );
  // A setting meant for tests and private deployments is said out loud, not only in a service's log (the block says it in a terminal).
  if (privateWebhooks && !quiet) {
    log.warn('WEBHOOKS_ALLOW_PRIVATE_TARGETS is on: webhooks may target http, loopback and private addresses (meant for tests and private deployments)');
  }
  // A person reads the block in a terminal; with JSON logs it goes to stderr, so stdout stays one JSON object a line.
  const block = banner({
    urls: running.urls,
    storage: running.storage,
    record: { kind: running.record, ...(config.DATA_DIR === undefined ? {} : { dataDir: config.DATA_DIR }) },
    privateWebhooks,
    ...(seeded ? { demo: seeded } : {}),
  });
  (quiet ? process.stdout : process.stderr).write(`${block}\n`);
  quiet?.open();
} catch (error) {
  // Port in use, Redis unreachable or refusing: one line that says what to do, exit 1. A bug keeps its stack.
  exitOnStartupFailure('Agent Room', error, log, { ports });
}
