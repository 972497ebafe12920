// @agentroom/kit/store: storage primitives: Redis, the clock, quota counters, idempotency records, resumable feeds, leases, feedback.
export * from './clock.js';
export * from './redis.js';
export * from './quota.js';
export * from './feed.js';
export * from './idempotency.js';
export * from './feedback.js';
export * from './lease-follower.js';
export * from './lease-store.js';
