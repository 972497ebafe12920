import { type Clock, DomainError, type PublicUrls } from '@agentroom/kit';
import type { AuthStore } from './store.js';

export interface AttemptLimiterOptions {
  store: AuthStore;
  clock: Clock;
  urls: PublicUrls;
  /** Wrong codes allowed per key in one window. */
  max?: number;
  windowMs?: number;
}

/**
 * Limits wrong user codes so codes cannot be guessed (CONTRACT §3: 10 per 15 minutes). The pages
 * count each wrong code under every key that applies (`session:<id>`, `addr:<ip>`), and check all
 * of them before looking a code up.
 */
export class AttemptLimiter {
  readonly max: number;
  readonly windowMs: number;
  private readonly store: AuthStore;
  private readonly clock: Clock;
  private readonly urls: PublicUrls;

  constructor(options: AttemptLimiterOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.urls = options.urls;
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
      remedy: `Wait ${seconds} seconds (Retry-After), then type the code exactly as the agent shows it at ${this.urls.siteUrl}/device.`,
      headers: { 'Retry-After': String(seconds) },
    });
  }

  /** Counts one wrong code under every key. */
  async fail(keys: readonly string[]): Promise<void> {
    for (const key of keys) await this.store.countAttempt(key, this.windowMs);
  }
}
