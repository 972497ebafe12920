import { loadConfigOrExit } from '@agentroom/kit/config';
import { createLogger } from '@agentroom/kit/log';
import { exitOnStartupFailure, runUntilSignal } from '@agentroom/kit/process';
import { authEnv, start } from './index.js';

const config = loadConfigOrExit(authEnv, 'auth');
const log = createLogger('auth', config.LOG_LEVEL, config.LOG_FORMAT);
try {
  await runUntilSignal(await start(config, { listen: true, log }), config, log);
} catch (error) {
  // A busy port, Redis unreachable…: one line that says what to do, and exit 1.
  exitOnStartupFailure('auth', error, log, { ports: { AUTH_HTTP_PORT: config.AUTH_HTTP_PORT, ADMIN_PORT: config.ADMIN_PORT } });
}
