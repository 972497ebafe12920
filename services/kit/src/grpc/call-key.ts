import { DomainError } from '../problems.js';

/**
 * How long a service remembers a write's call key: long enough for any call sent again after its
 * replica died (grpc-js's retries, within the call's deadline, and a client's own retry through
 * another edge); the answer to a repeat after that is edge's idempotency store's to give.
 */
export const CALL_KEY_MS = 60_000;

/** The longest call key a write may carry. */
export const CALL_KEY_MAX_LENGTH = 100;

/**
 * A write that names itself (its `call_key`) may be sent again to another replica, and a repeat
 * makes nothing twice (docs/decisions.md §18): CreatePost and SendMessage require one. A caller's
 * bug, not an agent's: no remedy to word.
 */
export function checkCallKey(callKey: string, rpc: string): void {
  if (callKey.length === 0 || callKey.length > CALL_KEY_MAX_LENGTH) {
    throw new DomainError('invalid-request', { detail: `${rpc} needs a call_key of 1 to ${CALL_KEY_MAX_LENGTH} characters.`, fields: { parameter: 'call_key' } });
  }
}
