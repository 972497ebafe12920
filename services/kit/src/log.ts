import { pino, type DestinationStream, type Logger } from 'pino';
import { currentContext } from './context.js';

export type { Logger } from 'pino';

/**
 * JSON logs to stdout with `service` on every line and the current `requestId` when there is one.
 * Secrets never reach a log line: the paths below are redacted wherever they appear.
 */
export function createLogger(service: string, level = 'info', destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ['authorization', '*.authorization', 'headers.authorization', 'password', '*.password', 'token', '*.token'],
      censor: '[redacted]',
    },
    mixin() {
      const context = currentContext();
      return context ? { requestId: context.requestId } : {};
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
