export { startEmbedded, type Embedded, type EmbeddedOptions } from './embedded.js';
export { startRouter, routeRequests, type Target, type RouterOptions } from './router.js';
export { ROUTES, CATCH_ALL, resolveRoutes, matchRoute, type Route, type ResolvedRoute, type Upstream, type Base } from './routes.js';
export { routerEnv, embeddedEnv, routerTimeoutsEnv } from './config.js';
