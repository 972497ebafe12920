import { closeHttpServer, createLogger, exitOnSignal, loadConfigOrExit, startMetricsServer } from '@agentroom/kit';
import { roomEnv, start } from './index.js';

const config = loadConfigOrExit(roomEnv, 'room');
const log = createLogger('room', config.LOG_LEVEL);
const room = await start(config, log);
const metrics = config.METRICS_PORT === undefined ? undefined : await startMetricsServer(config.METRICS_PORT);
exitOnSignal(log, async () => {
  await room.stop();
  if (metrics) await closeHttpServer(metrics.server, 1_000);
});
