// @agentroom/kit/domain: the rules every service shares about the room's data: limits, scopes, plain text, token formats, where a post came from.
export * from '../limits.js';
export * from '../safety.js';
export * from '../scopes.js';
export * from '../text.js';
export * from '../tokens.js';
export * from '../via.js';
