import type { Server } from 'node:http';
import { type Dependency, Probes, startAdminServer } from './admin.js';
import type { Logger } from './log.js';
import { onParentGone, type ParentWatch } from './parent.js';
import { stopTelemetry } from './telemetry.js';

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
 * The first step of an HTTP server's shutdown, while it still serves: every answer from now on says
 * `Connection: close` and idle keep-alive sockets are closed, so proxies in front open their next
 * connection to another replica instead of reusing one to this process.
 */
export function leaveKeepAlive(server: Server): void {
  server.prependListener('request', (_req, res) => {
    if (!res.headersSent) res.setHeader('connection', 'close');
  });
  server.closeIdleConnections();
}

/** Waits `ms` (the shutdown delay, during which readiness is already false). */
export function pause(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}

/** Waits `ms`, or less when `signal` aborts meanwhile (a loop that must stop at once at shutdown). */
export function pauseUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * When the parent is gone nobody is left to wait for a graceful stop, nor to send the second
 * signal that ends a stuck one: the process exits by itself this long after.
 */
const PARENT_GONE_EXIT_MS = 5_000;

/**
 * Runs `stop` once on the first SIGTERM or SIGINT, or once the process that started this one is
 * gone (`parent`, see onParentGone: by default only a Node parent's IPC channel is watched), then
 * exits. A second signal exits at once. Only `main.ts` files call this: factories stay free of
 * process-wide effects.
 */
export function exitOnSignal(log: Logger, stop: () => Promise<void>, parent: ParentWatch = 'channel'): void {
  let stopping = false;
  const shutDown = (why: Record<string, unknown>, message: string): void => {
    stopping = true;
    log.info(why, message);
    // The spans of the last requests are sent before the process exits (nothing to do when tracing is off).
    stop()
      .then(stopTelemetry)
      .then(
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
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      log.warn({ signal }, 'second signal; exiting now');
      process.exit(1);
    }
    shutDown({ signal }, 'shutting down');
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  onParentGone(() => {
    if (stopping) return;
    setTimeout(() => {
      log.error(`still stopping ${PARENT_GONE_EXIT_MS / 1000} s after the parent process was gone; exiting now`);
      process.exit(1);
    }, PARENT_GONE_EXIT_MS).unref();
    shutDown({ parent: 'gone' }, 'the process that started this one is gone; shutting down');
  }, parent);
}

/** A started service, as its `main.ts` runs it until a signal. */
export interface RunningService {
  /** What `/readyz` checks. */
  dependencies: Dependency[];
  /** The first step of shutdown, while still serving (gRPC NOT_SERVING, connections closed after answers). */
  drain(): void;
  stop(): Promise<void>;
}

/**
 * A service process's life after start: the admin port (`ADMIN_PORT`: /metrics, /livez, /readyz),
 * then on SIGTERM: not ready first, so balancers stop sending, while still serving for
 * `SHUTDOWN_DELAY_MS`; then in-flight work finishes within `SHUTDOWN_GRACE_MS`; then exit.
 */
export async function runUntilSignal(
  service: RunningService,
  config: { ADMIN_PORT?: number | undefined; SHUTDOWN_DELAY_MS: number },
  log: Logger,
): Promise<void> {
  const probes = new Probes(service.dependencies);
  const admin = config.ADMIN_PORT === undefined ? undefined : await startAdminServer(config.ADMIN_PORT, '0.0.0.0', probes);
  exitOnSignal(log, async () => {
    probes.drain();
    service.drain();
    await pause(config.SHUTDOWN_DELAY_MS);
    await service.stop();
    if (admin) await closeHttpServer(admin.server, 1_000);
  });
}
