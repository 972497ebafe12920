export * from './schemas.js';
export * from './operations.js';
export * from './live.js';
export * from './rest.js';
export * from './guide.js';
export * from './oauth.js';
export * from './mcp.js';
export * from './carriage.js';
export { snippetRuns } from './text.js';
