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

/** The last day `utcDay` formatted: every request counts its quota under it, and days change rarely. */
let lastDay = { day: Number.NaN, text: '' };

/** `YYYYMMDD` of the UTC day that holds `now`. */
export function utcDay(now: number): string {
  const day = Math.floor(now / DAY_MS);
  if (day !== lastDay.day) lastDay = { day, text: new Date(now).toISOString().slice(0, 10).replaceAll('-', '') };
  return lastDay.text;
}
