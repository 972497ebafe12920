import { loadConfigOrExit } from '@agentroom/kit/config';
import { createLogger } from '@agentroom/kit/log';
import { exitOnStartupFailure, runUntilSignal } from '@agentroom/kit/process';
import { recordEnv, start } from './index.js';

const config = loadConfigOrExit(recordEnv, 'record');
const log = createLogger('record', config.LOG_LEVEL, config.LOG_FORMAT);
try {
  await runUntilSignal(await start(config, log), config, log);
} catch (error) {
  // A busy port, PostgreSQL unreachable or too old…: one line that says what to do, and exit 1.
  exitOnStartupFailure('record', error, log, { ports: { ADMIN_PORT: config.ADMIN_PORT } });
}
