import * as grpc from '@grpc/grpc-js';
import { DomainError, isProblemSlug, type ProblemCode } from '../problems.js';
import { isStorageUnavailable } from '../store/redis.js';

/** The binary trailer that carries a domain error across the gRPC hop. */
const PROBLEM_TRAILER = 'agentroom-problem-bin';

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

interface ProblemTrailer {
  slug: string;
  remedy: string;
  detail?: string;
  extensions?: Record<string, string | number | boolean | string[]>;
  headers?: Record<string, string>;
}

/**
 * The one boundary where a domain error becomes a gRPC status. Anything that is not a domain error
 * is an unexpected fault: the caller gets a generic INTERNAL and the log gets the whole error.
 */
export function toServiceError(error: unknown): grpc.ServiceError {
  if (isStorageUnavailable(error)) {
    error = new DomainError('unavailable', {
      detail: 'Storage did not answer.',
      remedy: 'Retry in a few seconds with exponential backoff.',
      headers: { 'Retry-After': '5' },
    });
  }
  if (error instanceof DomainError) {
    const metadata = new grpc.Metadata();
    const trailer: ProblemTrailer = {
      slug: error.slug,
      remedy: error.remedy,
      ...(error.detail === undefined ? {} : { detail: error.detail }),
      extensions: error.extensions,
      headers: error.headers,
    };
    metadata.set(PROBLEM_TRAILER, Buffer.from(JSON.stringify(trailer)));
    const status = error.status === 503 ? grpc.status.UNAVAILABLE : STATUS_OF_CODE[error.code];
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

function readTrailer(metadata: grpc.Metadata | undefined): ProblemTrailer | undefined {
  const raw = metadata?.get(PROBLEM_TRAILER)[0];
  if (!Buffer.isBuffer(raw)) return undefined;
  try {
    const parsed: unknown = JSON.parse(raw.toString('utf8'));
    if (typeof parsed === 'object' && parsed !== null && 'slug' in parsed && 'remedy' in parsed) {
      return parsed as ProblemTrailer;
    }
  } catch {
    // A peer that sent garbage gets treated like one that sent nothing.
  }
  return undefined;
}

/** The other side of the hop: a failed call becomes the domain error it carried, or a generic one. */
export function fromServiceError(error: unknown): DomainError {
  if (error instanceof DomainError) return error;
  if (isServiceError(error)) {
    const trailer = readTrailer(error.metadata);
    if (trailer && isProblemSlug(trailer.slug)) {
      return new DomainError(trailer.slug, {
        remedy: trailer.remedy,
        ...(trailer.detail === undefined ? {} : { detail: trailer.detail }),
        extensions: trailer.extensions ?? {},
        headers: trailer.headers ?? {},
      });
    }
    if (error.code === grpc.status.UNAVAILABLE || error.code === grpc.status.DEADLINE_EXCEEDED) {
      return new DomainError('unavailable', {
        detail: error.code === grpc.status.DEADLINE_EXCEEDED ? 'An internal service did not answer in time.' : 'An internal service is unreachable.',
        remedy: 'Retry in a few seconds with exponential backoff.',
      });
    }
  }
  return new DomainError('internal', {
    remedy: 'Retry later; if it keeps failing, report it with the request id through POST /api/agent/feedback.',
  });
}
