// The gateway: the route table, the discovery documents rendered from it, and the local router.
// It imports no service: the launchers (launcher/) start services, and the router sends to them.
export { startRouter, routeRequests, endLiveStreams, type Target, type RouterOptions } from './router.js';
export { ROUTES, CATCH_ALL, resolveRoutes, matchRoute, type Route, type ResolvedRoute, type Upstream, type Base } from './routes.js';
export { routerEnv, routerTimeoutsEnv, timeoutsInOrder } from './config.js';
export { discoveryDocuments, type Document } from './discovery.js';
