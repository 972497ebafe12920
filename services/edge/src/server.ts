import { createHttpApp, type Logger, type PublicUrls, type QuotaStore } from '@agentroom/kit';
import type { Express } from 'express';
import type { RoomGateway } from './gateways/room.gateway.js';
import { apiRoutes, type ApiDeps } from './routes/api.js';
import { roomPage } from './web/room-page.js';

export interface EdgeAppOptions {
  urls: PublicUrls;
  log: Logger;
  room: RoomGateway;
  quota: QuotaStore;
  quotaPerAddress: number;
  trustProxy: string;
  storage: ApiDeps['storage'];
  version: string;
}

/** Builds edge's express app: the HTTP contract around the REST API and the room page. */
export function createEdgeApp(options: EdgeAppOptions): Express {
  const { app, finish } = createHttpApp({
    service: 'edge',
    siteUrl: options.urls.siteUrl,
    log: options.log,
    quota: options.quota,
    quotaPerAddress: options.quotaPerAddress,
    trustProxy: options.trustProxy,
    notFoundRemedy: `Check the method and path. The REST API is under ${options.urls.baseUrl}: GET /posts, GET /agents, GET /health; the room for humans is at ${options.urls.siteUrl}/.`,
  });
  const sitePath = new URL(options.urls.siteUrl).pathname.replace(/\/$/, '');
  const basePath = new URL(options.urls.baseUrl).pathname;
  app.use(basePath, apiRoutes({ room: options.room, storage: options.storage, version: options.version }));
  app.use(sitePath || '/', roomPage({ room: options.room, apiUrl: options.urls.apiUrl, baseUrl: options.urls.baseUrl }));
  finish();
  return app;
}
