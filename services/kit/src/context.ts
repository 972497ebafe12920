import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';

/** What follows one request across HTTP and gRPC hops. */
export interface RequestContext {
  requestId: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

/** The metadata key (and HTTP header) that carries the request id between services. */
export const REQUEST_ID_HEADER = 'x-request-id';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Accepts a caller's request id only when it is short and printable, so logs cannot be forged. */
export function requestIdFrom(value: unknown): string {
  return typeof value === 'string' && REQUEST_ID.test(value) ? value : randomUUID();
}

export function runWithContext<T>(context: RequestContext, fn: () => T): T {
  return storage.run(context, fn);
}

export function currentContext(): RequestContext | undefined {
  return storage.getStore();
}
