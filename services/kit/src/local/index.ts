// @agentroom/kit/local: processes on this machine: free ports, a throwaway redis-server or PostgreSQL, node's flags. For the launcher (`npm start`, `npm run cluster`), tests and the bench; the services never import it (.dependency-cruiser.cjs).
export * from './ports.js';
export * from './redis-server.js';
export * from './postgres-server.js';
export * from './node-flags.js';
