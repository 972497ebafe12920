// @agentroom/kit/http: the HTTP contract: admission and quota headers, problems, paging and cursors (the posts' own, which the room and the record share), idempotency, static assets, the outbound guard, request ids.
export * from './contract.js';
export * from './problem.js';
export * from './paging.js';
export * from './posts-cursors.js';
export * from './idempotency.js';
export * from './static-asset.js';
export * from './outbound.js';
export * from '../context.js';
