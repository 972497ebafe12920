// @agentroom/testkit: what only tests, e2e, the bench and scripts use (docs/decisions.md §26).
export * from './cluster.js';
export * from './human.js';
export * from './redis-cluster.js';
export * from './service-process.js';
export * from './wait.js';
