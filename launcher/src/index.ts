// The launchers: `npm start` (start.ts, everything in one process) and `npm run cluster`
// (cluster.ts, each service its own process). The only code that imports the services.
export { startEmbedded, type Embedded, type EmbeddedOptions } from './embedded.js';
export { embeddedEnv } from './config.js';
