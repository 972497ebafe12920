import type { PublicUrls } from '@agentroom/kit/config';
import { addressAdmission, createHttpApp } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import type { IdempotencyStore, QuotaStore } from '@agentroom/kit/store';
import type { Express } from 'express';
import type { AuthDomain } from './domain.js';
import { moderationPages, type RoomReader } from './web/moderation.js';
import { humanAnswer } from './web/remedies.js';
import { humanPages, type WebhookReader } from './web/routes.js';

export interface AuthAppOptions {
  domain: AuthDomain;
  urls: PublicUrls;
  log: Logger;
  quota: QuotaStore;
  idempotency: IdempotencyStore;
  quotaPerAddress: number;
  trustProxy: string;
  selfRegistration: boolean;
  /** The agents' webhooks, shown on /account (the delivery service). */
  webhooks: WebhookReader;
  /** The room's posts, threads and agents, for the moderation queue. */
  room: RoomReader;
}

/** Auth's HTTP side: the human pages and the human step of the signup, inside the HTTP contract. */
export function createAuthApp(options: AuthAppOptions): Express {
  const { urls } = options;
  const { app, finish } = createHttpApp({
    service: 'auth',
    siteUrl: urls.siteUrl,
    log: options.log,
    admit: addressAdmission(options.quota, options.quotaPerAddress, options.log, 'auth'),
    answer: humanAnswer(urls),
    idempotency: options.idempotency,
    trustProxy: options.trustProxy,
  });
  const pages = humanPages({ domain: options.domain, urls, selfRegistration: options.selfRegistration, webhooks: options.webhooks, log: options.log });
  app.use(new URL(urls.siteUrl).pathname.replace(/\/$/, '') || '/', pages.site);
  app.use(new URL(urls.siteUrl).pathname.replace(/\/$/, '') || '/', moderationPages({ domain: options.domain, room: options.room, urls, log: options.log }));
  app.use(new URL(urls.apiUrl).pathname.replace(/\/$/, '') || '/', pages.api);
  finish();
  return app;
}
