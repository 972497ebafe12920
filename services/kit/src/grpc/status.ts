import * as grpc from '@grpc/grpc-js';
import { z } from 'zod';
import { DomainError, isProblemSlug, problemFields, type ProblemCode, unavailable } from '../problems.js';
import { isStorageUnavailable } from '../store/redis.js';

/** The binary trailer that carries a domain error across the gRPC hop: its slug, detail and fields, nothing worded for a protocol. */
const PROBLEM_TRAILER = 'agentroom-problem-bin';

/** gRPC's retry pushback: a negative value tells the client's retry policy not to try again. */
const NO_RETRY_TRAILER = 'grpc-retry-pushback-ms';

const STATUS_OF_CODE: Record<ProblemCode, grpc.status> = {
  parse_error: grpc.status.INVALID_ARGUMENT,
  invalid_request: grpc.status.INVALID_ARGUMENT,
  not_found: grpc.status.NOT_FOUND,
  no_token: grpc.status.UNAUTHENTICATED,
  token_invalid: grpc.status.UNAUTHENTICATED,
  token_expired: grpc.status.UNAUTHENTICATED,
  scope_required: grpc.status.PERMISSION_DENIED,
  rate_limited: grpc.status.RESOURCE_EXHAUSTED,
  internal: grpc.status.INTERNAL,
};

// What arrives from a peer is outside data: checked before it becomes a DomainError.
const problemTrailer = z.object({
  slug: z.string().refine(isProblemSlug),
  detail: z.string().max(2_000).optional(),
  fields: problemFields.optional(),
});

/**
 * The one boundary where a domain error becomes a gRPC status. Anything that is not a domain error
 * is an unexpected fault: the caller gets a generic INTERNAL and the log gets the whole error.
 */
export function toServiceError(error: unknown): grpc.ServiceError {
  if (isStorageUnavailable(error)) error = unavailable();
  if (error instanceof DomainError) {
    const metadata = new grpc.Metadata();
    const trailer: z.input<typeof problemTrailer> = {
      slug: error.slug,
      ...(error.detail === undefined ? {} : { detail: error.detail }),
      fields: error.fields,
    };
    metadata.set(PROBLEM_TRAILER, Buffer.from(JSON.stringify(trailer)));
    const status = error.status === 503 ? grpc.status.UNAVAILABLE : STATUS_OF_CODE[error.code];
    // This replica answered: what it lacks (its storage, a service behind it, already retried there)
    // every replica lacks alike, so clients must not spend the deadline asking the next (docs/decisions.md §18).
    if (status === grpc.status.UNAVAILABLE) metadata.set(NO_RETRY_TRAILER, '-1');
    return Object.assign(new Error(error.message), { code: status, details: error.message, metadata });
  }
  return Object.assign(new Error('internal error'), {
    code: grpc.status.INTERNAL,
    details: 'internal error',
    metadata: new grpc.Metadata(),
  });
}

function isServiceError(error: unknown): error is grpc.ServiceError {
  return error instanceof Error && 'code' in error && typeof (error as { code: unknown }).code === 'number';
}

function readTrailer(metadata: grpc.Metadata | undefined): DomainError | undefined {
  const raw = metadata?.get(PROBLEM_TRAILER)[0];
  if (!Buffer.isBuffer(raw)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    return undefined;
  }
  // A peer that sent garbage gets treated like one that sent nothing.
  const trailer = problemTrailer.safeParse(parsed);
  if (!trailer.success || !isProblemSlug(trailer.data.slug)) return undefined;
  return new DomainError(trailer.data.slug, {
    ...(trailer.data.detail === undefined ? {} : { detail: trailer.data.detail }),
    fields: trailer.data.fields ?? {},
  });
}

/**
 * A call that ended UNAVAILABLE because its connection went, rather than because a server answered
 * it so (which sends its problem and the pushback trailer, {@link toServiceError}).
 */
export function connectionLost(error: grpc.ServiceError): boolean {
  const trailers = error.metadata as grpc.Metadata | undefined;
  return (
    error.code === grpc.status.UNAVAILABLE &&
    (trailers === undefined || (trailers.get(PROBLEM_TRAILER).length === 0 && trailers.get(NO_RETRY_TRAILER).length === 0))
  );
}

/** The other side of the hop: a failed call becomes the domain error it carried, or a generic one. */
export function fromServiceError(error: unknown): DomainError {
  if (error instanceof DomainError) return error;
  if (isServiceError(error)) {
    const carried = readTrailer(error.metadata);
    if (carried) return carried;
    if (error.code === grpc.status.UNAVAILABLE || error.code === grpc.status.DEADLINE_EXCEEDED) {
      return unavailable(error.code === grpc.status.DEADLINE_EXCEEDED ? 'An internal service did not answer in time.' : 'An internal service is unreachable.');
    }
  }
  return new DomainError('internal');
}
