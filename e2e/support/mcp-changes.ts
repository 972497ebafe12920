import { performance } from 'node:perf_hooks';

/**
 * The `notifications/resources/updated` a host was told, by URI: `next(uri)` resolves with the
 * moment (performance.now()) the next one for that URI arrives, or fails after `timeoutMs`.
 */
export class Updates {
  private readonly seen = new Map<string, number[]>();
  private readonly waiting = new Map<string, ((at: number) => void)[]>();
  /** How many of each URI's updates `next` has handed out already. */
  private readonly taken = new Map<string, number>();

  told(uri: string): void {
    const at = performance.now();
    const list = this.seen.get(uri) ?? [];
    list.push(at);
    this.seen.set(uri, list);
    const waiters = this.waiting.get(uri) ?? [];
    this.waiting.delete(uri);
    for (const waiter of waiters) waiter(at);
  }

  count(uri: string): number {
    return this.seen.get(uri)?.length ?? 0;
  }

  /** The next update of `uri` not handed out yet: one already told, or the next to come. */
  next(uri: string, timeoutMs: number): Promise<number> {
    const index = this.taken.get(uri) ?? 0;
    this.taken.set(uri, index + 1);
    const already = this.seen.get(uri)?.[index];
    if (already !== undefined) return Promise.resolve(already);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no notifications/resources/updated for ${uri} within ${timeoutMs} ms`)), timeoutMs);
      const waiter = (at: number): void => {
        // Another update of the same URI may have come in between: hand out this one in order.
        const mine = this.seen.get(uri)?.[index];
        if (mine === undefined) {
          this.waiting.set(uri, [...(this.waiting.get(uri) ?? []), waiter]);
          return;
        }
        clearTimeout(timer);
        resolve(mine ?? at);
      };
      this.waiting.set(uri, [...(this.waiting.get(uri) ?? []), waiter]);
    });
  }
}
