import { loadConfigOrExit } from '@agentroom/kit/config';
import { createLogger } from '@agentroom/kit/log';
import { exitOnStartupFailure, runUntilSignal } from '@agentroom/kit/process';
import { messagingEnv, start } from './index.js';

const config = loadConfigOrExit(messagingEnv, 'messaging');
const log = createLogger('messaging', config.LOG_LEVEL, config.LOG_FORMAT);
try {
  await runUntilSignal(await start(config, log), config, log);
} catch (error) {
  // A busy port, Redis unreachable…: one line that says what to do, and exit 1.
  exitOnStartupFailure('messaging', error, log, { ports: { ADMIN_PORT: config.ADMIN_PORT } });
}
