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
    throw new DomainError('invalid-request', {
      detail: `${rpc} needs a call_key of 1 to ${CALL_KEY_MAX_LENGTH} characters.`,
      fields: { parameter: 'call_key' },
    });
  }
}

/**
 * The call keys a memory store took in the last CALL_KEY_MS, oldest first, each with the id of what
 * its call made: a store without Redis answers a repeat from here. At most `max` are kept (10,000 by
 * default): one process has no other replica to be sent again to, so this only bounds what a burst
 * of writes costs.
 */
export class MemoryCallKeys {
  private readonly taken = new Map<string, { id: string; at: number }>();

  constructor(
    private readonly now: () => number,
    private readonly max = 10_000,
  ) {}

  /** The id the call named `key` made within CALL_KEY_MS, if any; the keys older than that go first. */
  made(key: string): string | undefined {
    const now = this.now();
    for (const [held, taken] of this.taken) {
      if (taken.at + CALL_KEY_MS > now) break;
      this.taken.delete(held);
    }
    return this.taken.get(key)?.id;
  }

  /** Notes that the call named `key` made `id` now. */
  take(key: string, id: string): void {
    this.taken.set(key, { id, at: this.now() });
    if (this.taken.size > this.max) this.taken.delete(this.taken.keys().next().value as string);
  }
}
