import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation, type ServingStatus } from 'grpc-health-check';
import { REQUEST_ID_HEADER, requestIdFrom, runWithContext } from '../context.js';
import type { Logger } from '../log.js';
import { grpcHandledDuration } from '../metrics.js';
import { toServiceError } from './status.js';

/** Keepalive settings shared by our servers; clients ping no more often than the server permits. */
export const SERVER_KEEPALIVE: grpc.ServerOptions = {
  // Ping an idle client every 30 s so dead peers of long watch streams are noticed.
  'grpc.keepalive_time_ms': 30_000,
  // Drop the connection when a ping is not answered within 10 s.
  'grpc.keepalive_timeout_ms': 10_000,
  // Accept client pings as often as every 10 s, even with no call in flight.
  'grpc.http2.min_ping_interval_without_data_ms': 10_000,
  'grpc.keepalive_permit_without_calls': 1,
  // Connections live at most 5 minutes (plus a grace for calls in flight; long watch streams are
  // resumed by their clients): clients then re-resolve names and spread over replicas added since.
  'grpc.max_connection_age_ms': 300_000,
  'grpc.max_connection_age_grace_ms': 30_000,
};

type UnaryImpl<Req, Res> = (request: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>;
type StreamImpl<Req, Res> = (request: Req, call: grpc.ServerWritableStream<Req, Res>) => Promise<void> | void;

/**
 * A gRPC server with the product's habits built in: request ids from metadata, metrics and error
 * mapping around every handler, grpc.health.v1, and a graceful shutdown that drains in-flight calls.
 */
export class GrpcServer {
  readonly server: grpc.Server;
  private readonly health = new HealthImplementation({ '': 'NOT_SERVING' });
  private readonly serviceNames: string[] = [];
  private monitorTimer: NodeJS.Timeout | undefined;
  private readonly draining = new AbortController();
  private stopping = false;

  constructor(
    private readonly service: string,
    private readonly log: Logger,
  ) {
    this.server = new grpc.Server(SERVER_KEEPALIVE);
    this.health.addToServer(this.server);
  }

  /** Wraps an async function as a unary handler. */
  unary<Req, Res>(method: string, impl: UnaryImpl<Req, Res>): grpc.handleUnaryCall<Req, Res> {
    return (call, callback) => {
      const started = process.hrtime.bigint();
      const requestId = requestIdFrom(call.metadata.get(REQUEST_ID_HEADER)[0]);
      runWithContext({ requestId }, () => {
        impl(call.request, call).then(
          (response) => {
            this.observe(method, started, grpc.status.OK);
            return callback(null, response);
          },
          (error: unknown) => {
            const serviceError = toServiceError(error);
            if (serviceError.code === grpc.status.INTERNAL) this.log.error({ err: error, method }, 'gRPC handler failed');
            this.observe(method, started, serviceError.code);
            return callback(serviceError);
          },
        );
      });
    };
  }

  /** Wraps a server-streaming handler; it ends the stream with the mapped status on failure. */
  serverStream<Req, Res>(method: string, impl: StreamImpl<Req, Res>): grpc.handleServerStreamingCall<Req, Res> {
    return (call) => {
      const requestId = requestIdFrom(call.metadata.get(REQUEST_ID_HEADER)[0]);
      runWithContext({ requestId }, () => {
        Promise.resolve()
          .then(() => impl(call.request, call))
          .catch((error: unknown) => {
            const serviceError = toServiceError(error);
            if (serviceError.code === grpc.status.INTERNAL) this.log.error({ err: error, method }, 'gRPC stream failed');
            // emit, not destroy: grpc-js turns a stream's 'error' into the call's status; a destroyed stream never sends one.
            if (!call.cancelled) call.emit('error', serviceError);
          });
      });
    };
  }

  private observe(method: string, started: bigint, code: grpc.status): void {
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const status = grpc.status[code];
    grpcHandledDuration.observe({ service: this.service, method, code: status }, seconds);
    // Inside the call's context, so the line carries the caller's requestId.
    this.log.debug({ method, code: status, ms: Math.round(seconds * 1e4) / 10 }, 'gRPC call handled');
  }

  addService(fullName: string, definition: grpc.ServiceDefinition, handlers: grpc.UntypedServiceImplementation): void {
    this.server.addService(definition, handlers);
    this.serviceNames.push(fullName);
  }

  /** Binds and marks every service SERVING; answers the bound port (useful with port 0). */
  async listen(address: string): Promise<number> {
    const port = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound)));
    });
    this.setStatus('SERVING');
    this.log.info({ address: address.replace(/:\d+$/, `:${port}`) }, 'gRPC listening');
    return port;
  }

  /**
   * Re-checks a dependency (storage) every `intervalMs` and reports NOT_SERVING while it fails,
   * so health answers say what is true rather than always SERVING. While it fails it is checked
   * every `retryMs`, so SERVING comes back within half a second of the dependency (`npm run chaos`).
   */
  monitor(check: () => Promise<void>, intervalMs = 5_000, retryMs = 500): void {
    let failing = false;
    const schedule = (ms: number): void => {
      if (this.stopping) return;
      this.monitorTimer = setTimeout(run, ms);
      this.monitorTimer.unref();
    };
    const run = (): void => {
      if (this.stopping) return;
      check().then(
        () => {
          if (this.stopping) return;
          if (failing) this.log.info('dependency check passed again; reporting SERVING');
          failing = false;
          this.setStatus('SERVING');
          schedule(intervalMs);
        },
        (error: unknown) => {
          if (this.stopping) return;
          if (!failing) this.log.warn({ err: error }, 'dependency check failed; reporting NOT_SERVING');
          failing = true;
          this.setStatus('NOT_SERVING');
          schedule(retryMs);
        },
      );
    };
    schedule(intervalMs);
  }

  setStatus(status: ServingStatus): void {
    this.health.setStatus('', status);
    for (const name of this.serviceNames) this.health.setStatus(name, status);
  }

  /**
   * NOT_SERVING first (so balancers stop sending), then let in-flight calls finish;
   * past the grace period the rest are cancelled.
   */
  /** Aborts when shutdown begins: long-lived streams end cleanly (clients resume) instead of holding it up. */
  get drainSignal(): AbortSignal {
    return this.draining.signal;
  }

  /**
   * The first step of shutdown: NOT_SERVING from now on (the dependency monitor no longer turns it
   * back), while calls are still served, so clients and probes move away before the server closes.
   */
  beginDrain(): void {
    this.stopping = true;
    clearTimeout(this.monitorTimer);
    this.setStatus('NOT_SERVING');
  }

  async shutdown(graceMs: number): Promise<void> {
    this.beginDrain();
    this.draining.abort();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.log.warn({ graceMs }, 'gRPC calls still running after the grace period; cancelling them');
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      timer.unref();
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

/**
 * For followFeed's `drained`: resolves when the server stream `call` has room again after a `write`
 * answered false, or when `signal` aborts. A watcher that reads slower than its feed is then caught
 * up from the store, instead of every item since being queued for it in this process.
 */
export function drainedOf(call: grpc.ServerWritableStream<unknown, unknown>, signal: AbortSignal): () => Promise<void> {
  return () =>
    once(call, 'drain', { signal }).then(
      () => undefined,
      () => undefined,
    );
}
