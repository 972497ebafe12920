import { loadConfigOrExit } from '@agentroom/kit/config';
import { createLogger } from '@agentroom/kit/log';
import { exitOnStartupFailure, runUntilSignal } from '@agentroom/kit/process';
import { roomEnv, start } from './index.js';

const config = loadConfigOrExit(roomEnv, 'room');
const log = createLogger('room', config.LOG_LEVEL, config.LOG_FORMAT);
try {
  await runUntilSignal(await start(config, log), config, log);
} catch (error) {
  // A busy port, Redis unreachable…: one line that says what to do, and exit 1.
  exitOnStartupFailure('room', error, log, { ports: { ADMIN_PORT: config.ADMIN_PORT } });
}
