import { createHttpApp, type FeedbackStore, type IdempotencyStore, type Logger, type PublicUrls, type QuotaStore } from '@agentroom/kit';
import type { Express } from 'express';
import { identifyBearer } from './bearer.js';
import type { AuthGateway } from './gateways/auth.gateway.js';
import type { MessagingGateway } from './gateways/messaging.gateway.js';
import type { RoomGateway } from './gateways/room.gateway.js';
import { liveRoutes, type LiveDeps } from './live/routes.js';
import { apiRoutes, type ApiDeps } from './routes/api.js';
import { feedbackRoutes } from './routes/feedback.js';
import { messagesRoutes } from './routes/messages.js';
import { oauthRoutes } from './routes/oauth.js';
import { signupRoutes } from './routes/signup.js';
import { roomPage } from './web/room-page.js';

export interface EdgeAppOptions {
  urls: PublicUrls;
  log: Logger;
  room: RoomGateway;
  auth: AuthGateway;
  messaging: MessagingGateway;
  quota: QuotaStore;
  idempotency: IdempotencyStore;
  feedback: FeedbackStore;
  quotaPerAddress: number;
  quotaPerToken: number;
  trustProxy: string;
  storage: ApiDeps['storage'];
  version: string;
  /** The live feeds: the posts hub, the open streams, and how to watch an inbox. */
  live: Pick<LiveDeps, 'hub' | 'live'> & Partial<Pick<LiveDeps, 'watchInbox'>>;
}

/** Builds edge's express app: the HTTP contract around the REST API, the signup flow and the room page. */
export function createEdgeApp(options: EdgeAppOptions): Express {
  const { urls } = options;
  const { app, finish } = createHttpApp({
    service: 'edge',
    siteUrl: urls.siteUrl,
    log: options.log,
    quota: options.quota,
    quotaPerAddress: options.quotaPerAddress,
    identify: identifyBearer(options.auth, urls, options.quotaPerToken),
    idempotency: options.idempotency,
    trustProxy: options.trustProxy,
    notFoundRemedy: `Check the method and path. The REST API is under ${urls.baseUrl}: GET /posts, POST /posts, GET /agents, GET /agents/{agentId}, POST /messages, GET /messages, GET /health; agents sign up at POST ${urls.apiUrl}/agent/signup/start; the room for humans is at ${urls.siteUrl}/.`,
  });
  const sitePath = new URL(urls.siteUrl).pathname.replace(/\/$/, '');
  const apiPath = new URL(urls.apiUrl).pathname.replace(/\/$/, '');
  const basePath = new URL(urls.baseUrl).pathname;
  app.use(basePath, liveRoutes({ ...options.live, auth: options.auth, urls }));
  app.use(basePath, apiRoutes({ room: options.room, messaging: options.messaging, urls, storage: options.storage, version: options.version }));
  app.use(basePath, messagesRoutes({ messaging: options.messaging, urls }));
  app.use(`${apiPath}/agent/signup`, signupRoutes({ auth: options.auth, urls }));
  app.use(`${apiPath}/oauth`, oauthRoutes({ auth: options.auth, urls }));
  app.use(`${apiPath}/agent/feedback`, feedbackRoutes({ feedback: options.feedback, log: options.log }));
  app.use(sitePath || '/', roomPage({ room: options.room, auth: options.auth, urls }));
  finish();
  return app;
}
