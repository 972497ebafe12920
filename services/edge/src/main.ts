import { loadConfigOrExit } from '@agentroom/kit/config';
import { createLogger } from '@agentroom/kit/log';
import { exitOnStartupFailure, runUntilSignal } from '@agentroom/kit/process';
import { edgeEnv, start } from './index.js';

const config = loadConfigOrExit(edgeEnv, 'edge');
const log = createLogger('edge', config.LOG_LEVEL, config.LOG_FORMAT);
try {
  await runUntilSignal(await start(config, { listen: true, log }), config, log);
} catch (error) {
  // A busy port, Redis unreachable…: one line that says what to do, and exit 1.
  exitOnStartupFailure('edge', error, log, { ports: { EDGE_PORT: config.EDGE_PORT, ADMIN_PORT: config.ADMIN_PORT } });
}
