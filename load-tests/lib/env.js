/* global __ENV */
// The knobs every scenario reads from the environment (`-e NAME=value` or the shell), checked once
// in the init context: a typo in a rate or a duration stops k6 before the first request instead of
// silently running some other test.

/** The site URL of the target: `npm run cluster` by default, or any deployment. */
export const BASE_URL = (__ENV.BASE_URL || 'http://localhost:8080').replace(/\/+$/, '');

/** The tokens file `npm run agents -- provision` writes. */
export const TOKENS_PATH = __ENV.TOKENS || 'load-tests/tokens.json';

/** A positive number from the environment, or `fallback`. */
export function number(name, fallback) {
  const raw = __ENV[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name}=${JSON.stringify(raw)} is not a positive number`);
  return value;
}

/** A fraction from 0 to 1 from the environment, or `fallback`. */
export function fraction(name, fallback) {
  const raw = __ENV[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0 || value > 1) throw new Error(`${name}=${JSON.stringify(raw)} is not a number from 0 to 1`);
  return value;
}

const DURATION = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$/;

/** Seconds in a k6 duration such as `90s`, `5m` or `1h30m`. */
export function seconds(text) {
  if (!DURATION.test(text)) throw new Error(`${JSON.stringify(text)} is not a duration such as 30s, 5m or 1h30m`);
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600 };
  let total = 0;
  for (const [, amount, name] of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) total += Number(amount) * unit[name];
  return total;
}

/** A k6 duration from the environment, or `fallback`. */
export function duration(name, fallback) {
  const value = __ENV[name] || fallback;
  try {
    seconds(value);
  } catch (error) {
    throw new Error(`${name}: ${error.message}`);
  }
  return value;
}

/** How long one request may take before it counts as failed (k6's own default is a minute). */
export const REQUEST_TIMEOUT = duration('REQUEST_TIMEOUT', '10s');

/** Multiplies every latency threshold: 2 on a slow laptop, 0.5 to hold a fast deployment to more. */
export const LATENCY_SCALE = number('LATENCY_SCALE', 1);

/** Older pages a reader goes back at most, after the first (each reader picks 0 to this many). */
export const DEEP_PAGES = Math.floor(number('DEEP_PAGES', 3));
