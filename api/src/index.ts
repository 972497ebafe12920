export * from './schemas.js';
export * from './operations.js';
export * from './live.js';
export * from './rest.js';
export * from './guide.js';
export * from './oauth.js';
export * from './mcp.js';
export * from './carriage.js';
export { postText, REMOVED_WORDS, snippetRuns } from './text.js';
