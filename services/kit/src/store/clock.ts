/** Time as the product sees it; tests inject their own. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

const DAY_MS = 86_400_000;

/** Milliseconds since the epoch of the next UTC midnight after `now`. */
export function nextUtcMidnight(now: number): number {
  return Math.floor(now / DAY_MS) * DAY_MS + DAY_MS;
}

/** `YYYYMMDD` of the UTC day that holds `now`. */
export function utcDay(now: number): string {
  return new Date(now).toISOString().slice(0, 10).replaceAll('-', '');
}
