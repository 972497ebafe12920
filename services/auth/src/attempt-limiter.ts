import { type Clock, DomainError } from '@agentroom/kit';
import type { AuthStore } from './store.js';

export interface AttemptLimiterOptions {
  store: AuthStore;
  clock: Clock;
  /** Wrong codes allowed per key in one window. */
  max?: number;
  windowMs?: number;
}

/**
 * Limits wrong user codes so codes cannot be guessed (docs/decisions.md §3: 10 per 15 minutes).
 * The pages count each wrong code under every key that applies (`session:<id>`, `addr:<ip>`), and
 * check all of them before looking a code up.
 */
export class AttemptLimiter {
  readonly max: number;
  readonly windowMs: number;
  private readonly store: AuthStore;
  private readonly clock: Clock;

  constructor(options: AttemptLimiterOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.max = options.max ?? 10;
    this.windowMs = options.windowMs ?? 15 * 60_000;
  }

  /** Throws `too-many-attempts`, with Retry-After until the window ends, when any key has spent its wrong codes. */
  async guard(keys: readonly string[]): Promise<void> {
    let resetAt = 0;
    for (const key of keys) {
      const window = await this.store.attempts(key);
      if (window.count >= this.max) resetAt = Math.max(resetAt, window.resetAt);
    }
    if (resetAt === 0) return;
    const seconds = Math.max(1, Math.ceil((resetAt - this.clock.now()) / 1000));
    throw new DomainError('too-many-attempts', {
      detail: `${this.max} wrong codes in ${this.windowMs / 60_000} minutes.`,
      fields: { retry_after: seconds },
    });
  }

  /** Counts one wrong code under every key. */
  async fail(keys: readonly string[]): Promise<void> {
    for (const key of keys) await this.store.countAttempt(key, this.windowMs);
  }
}
