import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { z } from 'zod';
import { GRPC_DEADLINE_DEFAULT_MS } from '../config.js';
import { currentContext, REQUEST_ID_HEADER } from '../context.js';
import type { Dependency } from '../admin.js';
import { connectionLost, fromServiceError } from './status.js';

/**
 * How a call that found its replica gone is sent again (docs/decisions.md §18): on UNAVAILABLE only
 * (the connection dropped or could not be made; a server that answers UNAVAILABLE itself says not to
 * retry, see status.ts), at most five attempts (grpc-js's most), the second up to 25 ms after the
 * failure and each next up to 100 ms after the one before (gRPC draws each wait at random below its
 * bound): time enough for round_robin to drop the dead replica, and far inside GRPC_DEADLINE_MS,
 * which bounds the whole call, retries included. Five, not three: round_robin takes replicas in turn
 * for every call of the channel, so under concurrent calls a call's next attempts may be picked for
 * the dead replica again before the channel has seen it go; three let one read in a few thousand
 * fail through a SIGKILL.
 */
export const RETRY_POLICY = {
  maxAttempts: 5,
  initialBackoff: '0.025s',
  maxBackoff: '0.1s',
  backoffMultiplier: 4,
  retryableStatusCodes: ['UNAVAILABLE'],
} as const;

/** One method of a service config's `methodConfig` names. */
export interface MethodName {
  /** The full service name, `agentroom.room.v1.RoomService`. */
  service: string;
  method: string;
}

/**
 * The service config every client dials with: `round_robin`, and RETRY_POLICY for `retried` methods.
 * Every address a name resolves to gets a connection, and calls take them in turn: dialled as
 * `dns:///room-headless:50051`, one client spreads its calls over every pod behind a headless Service
 * (grpc-js's default, pick_first, would send them all to the first address), and a retry goes to the
 * next replica.
 */
export function serviceConfig(retried: readonly MethodName[]): string {
  return JSON.stringify({
    loadBalancingConfig: [{ round_robin: {} }],
    methodConfig: retried.length === 0 ? [] : [{ name: retried, retryPolicy: RETRY_POLICY }],
  });
}

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
  // round_robin over every address; no method retried here: clientOptions(service) names those.
  'grpc.service_config': serviceConfig([]),
  // On by default in grpc-js; said here because retries are part of how replicas work for us (docs/decisions.md §18).
  'grpc.enable_retries': 1,
  // A name is resolved again at most this often (servers close connections after SERVER_KEEPALIVE's
  // max age, which makes clients re-resolve and find new pods).
  'grpc.dns_min_time_between_resolutions_ms': 5_000,
};

/**
 * What a method's proto says of repeating it (`option idempotency_level`, google.protobuf.MethodOptions):
 * `NO_SIDE_EFFECTS` (reads, watches), `IDEMPOTENT` (a write whose repeat changes nothing more and
 * answers the same), or `IDEMPOTENCY_UNKNOWN`, the default: a write a repeat could apply twice.
 */
export const IDEMPOTENCY_LEVELS = ['NO_SIDE_EFFECTS', 'IDEMPOTENT', 'IDEMPOTENCY_UNKNOWN'] as const;
export type IdempotencyLevel = (typeof IDEMPOTENCY_LEVELS)[number];

/** One method of a service and whether its calls are retried. */
export interface MethodRetry extends MethodName {
  /** Its name on the generated client (`createPost`). */
  clientMethod: string;
  level: IdempotencyLevel;
  /** A server stream: retried only until the server's first answer (a watch's initial metadata), never after. */
  streaming: boolean;
  retried: boolean;
}

// What proto-loader keeps of each method: its path and options (grpc-js's own type leaves them out).
const loadedMethod = z.object({
  path: z.string().regex(/^\/[\w.]+\/\w+$/),
  originalName: z.string().optional(),
  responseStream: z.boolean(),
  options: z.object({ idempotency_level: z.enum(IDEMPOTENCY_LEVELS).optional() }).optional(),
});

/** Every method of a service loaded from its proto, with its idempotency level and whether it is retried. */
export function retryPlan(service: grpc.ServiceDefinition): MethodRetry[] {
  return Object.values(service).map((definition: unknown) => {
    const method = loadedMethod.parse(definition);
    const [, serviceName = '', methodName = ''] = method.path.split('/');
    const level = method.options?.idempotency_level ?? 'IDEMPOTENCY_UNKNOWN';
    const clientMethod = method.originalName ?? methodName.charAt(0).toLowerCase() + methodName.slice(1);
    return { service: serviceName, method: methodName, clientMethod, level, streaming: method.responseStream, retried: level !== 'IDEMPOTENCY_UNKNOWN' };
  });
}

/**
 * The channel options of a client of `service` (its generated client's `.service`): CLIENT_OPTIONS,
 * with its reads, watches and idempotent writes retried on another replica (docs/decisions.md §18).
 */
export function clientOptions(service: grpc.ServiceDefinition): grpc.ChannelOptions {
  const retried = retryPlan(service)
    .filter((method) => method.retried)
    .map(({ service: name, method }) => ({ service: name, method }));
  return { ...CLIENT_OPTIONS, 'grpc.service_config': serviceConfig(retried) };
}

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
  options: UnaryCallOptions = {},
): Promise<Res> {
  const deadline = Date.now() + deadlineMs;
  const metadata = outgoingMetadata();
  const attempt = (last: boolean): Promise<Res> =>
    new Promise<Res>((resolve, reject) => {
      invoke(metadata.clone(), { deadline }, (error, response) => {
        if (error) {
          if (!last && options.repeatable === true && connectionLost(error) && Date.now() < deadline) return resolve(attempt(true));
          return reject(fromServiceError(error));
        }
        if (response === undefined) return reject(fromServiceError(new Error('empty response')));
        return resolve(response);
      });
    });
  return attempt(false);
}

export interface UnaryCallOptions {
  /**
   * The method may be sent again (its proto's idempotency_level, docs/decisions.md §18). grpc-js's
   * retry policy sends such a call again only until the server's answer has begun: a replica killed
   * after its response headers left, before the message, ends the call with a lost connection that
   * grpc-js will not retry. Such a call is then made once more, within the same deadline.
   */
  repeatable?: boolean;
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

const HealthClientCtor = grpc.makeClientConstructor(healthService as unknown as grpc.ServiceDefinition, 'grpc.health.v1.Health') as unknown as new (
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ChannelOptions,
) => HealthClient;

/** grpc.health.v1 Check against a peer; never throws. */
export class HealthChecker {
  private readonly client: HealthClient;

  constructor(address: string) {
    // A check is a read: with several replicas behind `address`, one that is gone is asked past.
    this.client = new HealthClientCtor(address, grpc.credentials.createInsecure(), {
      ...CLIENT_OPTIONS,
      'grpc.service_config': serviceConfig([{ service: 'grpc.health.v1.Health', method: 'Check' }]),
    });
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

/** What proto-loader makes of a service: its generated client's constructor, with the service's definition. */
export type GeneratedService<C extends grpc.Client> = (new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => C) & {
  service: grpc.ServiceDefinition;
};

/** A generated client's own methods (the proto's RPCs), by the camelCase names calls use. */
type RpcName<C> = Exclude<keyof C, keyof grpc.Client> & string;

// A generated method's last overload (the one conditional types read) is `(argument, callback)` for
// a unary RPC and `(argument, options?)` for a server stream: its types are read from there.
type Unary<Req, Res> = (argument: Req, callback: grpc.requestCallback<Res>) => grpc.ClientUnaryCall;
type Stream<Req, Res> = (argument: Req, options?: grpc.CallOptions) => grpc.ClientReadableStream<Res>;

/** The unary RPCs of generated client `C`: `'listPosts' | 'getPost' | …`. */
export type UnaryMethod<C> = { [K in RpcName<C>]: K extends Uncapitalize<K> ? (C[K] extends Unary<infer _Req, infer _Res> ? K : never) : never }[RpcName<C>];

/** The server-streaming RPCs of generated client `C`: `'watchPosts'`. */
export type StreamMethod<C> = { [K in RpcName<C>]: K extends Uncapitalize<K> ? (C[K] extends Stream<infer _Req, infer _Res> ? K : never) : never }[RpcName<C>];

/** What RPC `K` of `C` takes: the generated request type, its fields optional. */
export type RequestOf<C, K> = K extends keyof C
  ? C[K] extends Unary<infer Req, infer _Res>
    ? Req
    : C[K] extends Stream<infer Req, infer _Res>
      ? Req
      : never
  : never;

/** What unary RPC `K` of `C` answers: the generated `__Output` type (defaults filled in). */
export type AnswerOf<C, K> = K extends keyof C ? (C[K] extends Unary<infer _Req, infer Res> ? Res : never) : never;

/** What each message of stream RPC `K` of `C` carries: the generated `__Output` type. */
export type ItemOf<C, K> = K extends keyof C ? (C[K] extends Stream<infer _Req, infer Res> ? Res : never) : never;

/**
 * One service as its callers see it, typed from its generated client `C`: every RPC of the proto is
 * callable by name, its request and answer types inferred, so a method added to a .proto and
 * generated again needs no code here (docs/decisions.md §29).
 */
export interface ServiceClient<C extends grpc.Client> {
  /** The full service name, `agentroom.room.v1.RoomService`. */
  readonly service: string;
  /**
   * A unary call, as `unaryCall` runs it: within the client's deadline, with the request id, a failure
   * arriving as a DomainError; made once more after a lost connection when its proto says a repeat
   * is harmless (idempotency_level, docs/decisions.md §18).
   */
  call<K extends UnaryMethod<C>>(method: K, request: RequestOf<C, K>): Promise<AnswerOf<C, K>>;
  /** A server stream, with the request id and no deadline: it lives until cancelled or ended by the server. */
  watch<K extends StreamMethod<C>>(method: K, request: RequestOf<C, K>): grpc.ClientReadableStream<ItemOf<C, K>>;
  /** grpc.health.v1 of this service at the address (never throws). */
  check(): Promise<HealthStatus>;
  close(): void;
}

export interface ServiceClientOptions {
  /** The deadline of each unary call and health check: the service's GRPC_DEADLINE_MS, its default if left out. */
  deadlineMs?: number;
}

/** A client of `Service` (a generated service, `roomProto().RoomService`) at `address`, dialled with `clientOptions`. */
export function serviceClient<C extends grpc.Client>(Service: GeneratedService<C>, address: string, options: ServiceClientOptions = {}): ServiceClient<C> {
  const { deadlineMs = GRPC_DEADLINE_DEFAULT_MS } = options;
  const client = new Service(address, grpc.credentials.createInsecure(), clientOptions(Service.service));
  const plan = retryPlan(Service.service);
  const repeatable = new Set(plan.filter((method) => method.retried).map((method) => method.clientMethod));
  const service = plan[0]?.service ?? '';
  // Made at the first check: a client nobody checks (auth's, delivery's) holds no second channel.
  let health: HealthChecker | undefined;
  // Each RPC of the generated client by its name, looked up once.
  const rpcs = new Map(
    plan.flatMap(({ clientMethod }): [string, (...args: unknown[]) => unknown][] => {
      const found: unknown = (client as unknown as Record<string, unknown>)[clientMethod];
      return typeof found === 'function' ? [[clientMethod, (found as (...args: unknown[]) => unknown).bind(client)]] : [];
    }),
  );
  const rpc = (name: string): ((...args: unknown[]) => unknown) => {
    const found = rpcs.get(name);
    if (found === undefined) throw new Error(`${service} has no method ${name}`);
    return found;
  };
  return {
    service,
    call<K extends UnaryMethod<C>>(name: K, request: RequestOf<C, K>): Promise<AnswerOf<C, K>> {
      const method = String(name);
      const invoke = rpcs.get(method);
      if (invoke === undefined) return Promise.reject(new Error(`${service} has no method ${method}`));
      return unaryCall<AnswerOf<C, K>>(
        deadlineMs,
        (metadata, callOptions, callback) => invoke(request, metadata, callOptions, callback) as grpc.ClientUnaryCall,
        {
          repeatable: repeatable.has(method),
        },
      );
    },
    watch<K extends StreamMethod<C>>(name: K, request: RequestOf<C, K>): grpc.ClientReadableStream<ItemOf<C, K>> {
      return rpc(String(name))(request, outgoingMetadata()) as grpc.ClientReadableStream<ItemOf<C, K>>;
    },
    check() {
      health ??= new HealthChecker(address);
      return health.check(service, deadlineMs);
    },
    close() {
      client.close();
      health?.close();
    },
  };
}
