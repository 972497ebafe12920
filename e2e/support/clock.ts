import type { Clock } from '@agentroom/kit/store';

/** The wall clock plus however far a test moved it: the product's rules see time pass without the test sleeping. */
export class MovableClock implements Clock {
  private offset = 0;

  now(): number {
    return Date.now() + this.offset;
  }

  advance(ms: number): void {
    this.offset += ms;
  }
}
