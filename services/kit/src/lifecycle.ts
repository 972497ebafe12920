import type { Server } from 'node:http';
import type { Logger } from './log.js';

/**
 * Closes an HTTP server gracefully: stop accepting, let in-flight requests finish, drop idle
 * keep-alive sockets at once, and cut whatever is left when the grace period ends.
 */
export async function closeHttpServer(server: Server, graceMs: number): Promise<void> {
  if (!server.listening) return;
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const timer = setTimeout(() => server.closeAllConnections(), graceMs);
  timer.unref();
  await closed;
  clearTimeout(timer);
}

/**
 * Runs `stop` once on the first SIGTERM or SIGINT, then exits. A second signal exits at once.
 * Only `main.ts` files call this: factories stay free of process-wide effects.
 */
export function exitOnSignal(log: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      log.warn({ signal }, 'second signal; exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, 'shutting down');
    stop().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
