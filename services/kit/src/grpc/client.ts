import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { currentContext, REQUEST_ID_HEADER } from '../context.js';
import type { Dependency } from '../admin.js';
import { fromServiceError } from './status.js';

/** Client keepalive: within what SERVER_KEEPALIVE permits, so servers never answer too_many_pings. */
export const CLIENT_OPTIONS: grpc.ChannelOptions = {
  // Ping after 30 s without activity; long watch streams notice a dead server.
  'grpc.keepalive_time_ms': 30_000,
  'grpc.keepalive_timeout_ms': 10_000,
  'grpc.keepalive_permit_without_calls': 1,
  // A peer that was restarted (a crash, a rollout) is found again within about a second; grpc-js's own
  // defaults back off up to 120 s, and calls meanwhile fail as unavailable.
  'grpc.initial_reconnect_backoff_ms': 250,
  'grpc.max_reconnect_backoff_ms': 1_000,
  // Every address a name resolves to gets a connection, and calls take them in turn: dialled as
  // `dns:///room-headless:50051`, one client spreads its calls over every pod behind a headless Service
  // (grpc-js's default, pick_first, would send them all to the first address).
  'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
  // A name is resolved again at most this often (servers close connections after SERVER_KEEPALIVE's
  // max age, which makes clients re-resolve and find new pods).
  'grpc.dns_min_time_between_resolutions_ms': 5_000,
};

/** Metadata for an outgoing call: the current request id crosses the hop. */
export function outgoingMetadata(): grpc.Metadata {
  const metadata = new grpc.Metadata();
  const context = currentContext();
  if (context) metadata.set(REQUEST_ID_HEADER, context.requestId);
  return metadata;
}

/**
 * Runs one unary call as a Promise, with a deadline (always) and the request id.
 * A failure arrives as the DomainError the server sent, or `unavailable`/`internal`.
 */
export function unaryCall<Res>(
  deadlineMs: number,
  invoke: (metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<Res>) => grpc.ClientUnaryCall,
): Promise<Res> {
  return new Promise<Res>((resolve, reject) => {
    invoke(outgoingMetadata(), { deadline: Date.now() + deadlineMs }, (error, response) => {
      if (error) return reject(fromServiceError(error));
      if (response === undefined) return reject(fromServiceError(new Error('empty response')));
      return resolve(response);
    });
  });
}

export type HealthStatus = 'SERVING' | 'NOT_SERVING' | 'UNKNOWN' | 'SERVICE_UNKNOWN' | 'UNREACHABLE';

interface HealthClient extends grpc.Client {
  check(
    request: { service: string },
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<{ status: string }>,
  ): grpc.ClientUnaryCall;
}

const HealthClientCtor = grpc.makeClientConstructor(
  healthService as unknown as grpc.ServiceDefinition,
  'grpc.health.v1.Health',
) as unknown as new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => HealthClient;

/** grpc.health.v1 Check against a peer; never throws. */
export class HealthChecker {
  private readonly client: HealthClient;

  constructor(address: string) {
    this.client = new HealthClientCtor(address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  }

  /** Check of grpc.health.v1: an unknown service answers NOT_FOUND, which reads as SERVICE_UNKNOWN. */
  check(service = '', deadlineMs = 1_000): Promise<HealthStatus> {
    return new Promise((resolve) => {
      this.client.check({ service }, outgoingMetadata(), { deadline: Date.now() + deadlineMs }, (error, response) => {
        if (error) return resolve(error.code === grpc.status.NOT_FOUND ? 'SERVICE_UNKNOWN' : 'UNREACHABLE');
        const status = response?.status;
        return resolve(status === 'SERVING' || status === 'NOT_SERVING' ? status : 'UNKNOWN');
      });
    });
  }

  close(): void {
    this.client.close();
  }
}

/**
 * A peer service as a readiness dependency: ready while grpc.health.v1 says SERVING for it. With
 * several replicas behind one name, any replica serving is enough (calls go to those that do).
 */
export function grpcDependency(name: string, address: string): Dependency & { close(): void } {
  let checker: HealthChecker | undefined;
  return {
    name,
    async check() {
      checker ??= new HealthChecker(address);
      const status = await checker.check();
      if (status !== 'SERVING') throw new Error(status.toLowerCase().replace('_', ' '));
    },
    close() {
      checker?.close();
      checker = undefined;
    },
  };
}
