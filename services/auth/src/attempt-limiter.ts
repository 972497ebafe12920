import { DomainError } from '@agentroom/kit/problems';
import type { Clock } from '@agentroom/kit/store';
import type { AuthStore } from './store.js';

/** Who types a code: their session (hashed) and their client address. */
export interface AttemptClient {
  session: string;
  address: string;
}

export interface AttemptLimiterOptions {
  store: AuthStore;
  clock: Clock;
  /** Wrong codes one session may type in one window. */
  sessionMax?: number;
  sessionWindowMs?: number;
  /** Wrong codes one address may type at once before it is slowed down. */
  addressBurst?: number;
  /** After the burst, one more wrong code per this many ms from the address. */
  addressDrainMs?: number;
}

/**
 * Limits wrong user codes so codes cannot be guessed (docs/decisions.md §3), without locking a whole
 * office out because one of its people (or a guesser) shares its address:
 *
 * - per session, strict: 10 wrong codes per 15 minutes (a window that starts with the first);
 * - per client address, a leaky bucket: a burst of 30, then one more every 20 seconds. A guesser
 *   behind the address gets at most three codes a minute; anyone else behind it waits seconds, not
 *   a quarter of an hour.
 *
 * A refusal says when to try again (`retry_after`, the `Retry-After` of the answer).
 */
export class AttemptLimiter {
  readonly sessionMax: number;
  readonly sessionWindowMs: number;
  readonly addressBurst: number;
  readonly addressDrainMs: number;
  private readonly store: AuthStore;
  private readonly clock: Clock;

  constructor(options: AttemptLimiterOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.sessionMax = options.sessionMax ?? 10;
    this.sessionWindowMs = options.sessionWindowMs ?? 15 * 60_000;
    this.addressBurst = options.addressBurst ?? 30;
    this.addressDrainMs = options.addressDrainMs ?? 20_000;
  }

  /** Throws `too-many-attempts`, with `retry_after` in seconds, when the session or the address may not try a code now. */
  async guard(client: AttemptClient): Promise<void> {
    let waitMs = 0;
    let detail = '';
    const session = await this.store.attempts(`session:${client.session}`);
    if (session.count >= this.sessionMax) {
      waitMs = session.resetAt - this.clock.now();
      detail = `${this.sessionMax} wrong codes in ${this.sessionWindowMs / 60_000} minutes from this session.`;
    }
    // The bucket refuses the code that would make it overflow, until enough has drained for one more.
    const level = await this.store.bucketLevel(`addr:${client.address}`, this.addressDrainMs);
    const addressWaitMs = (level + 1 - this.addressBurst) * this.addressDrainMs;
    if (addressWaitMs > 0 && addressWaitMs > waitMs) {
      waitMs = addressWaitMs;
      detail = `Too many wrong codes from this address: after ${this.addressBurst}, one every ${this.addressDrainMs / 1000} seconds.`;
    }
    if (waitMs <= 0) return;
    throw new DomainError('too-many-attempts', { detail, fields: { retry_after: Math.max(1, Math.ceil(waitMs / 1000)) } });
  }

  /** Counts one wrong code against the session and the address. */
  async fail(client: AttemptClient): Promise<void> {
    await this.store.countAttempt(`session:${client.session}`, this.sessionWindowMs);
    await this.store.fillBucket(`addr:${client.address}`, this.addressDrainMs);
  }
}
