import type * as grpc from '@grpc/grpc-js';
import { GrpcServer } from '@agentroom/kit/grpc';
import type { OutboundPolicy, ResolvedAddress } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import { deliveryProto, type DeliveryServiceHandlers, type Webhook } from '@agentroom/proto';
import type { DeliveryStore } from './store.js';
import {
  type AttemptRecord,
  checkAgentId,
  checkEvents,
  checkTarget,
  MAX_WEBHOOKS,
  messageIdOf,
  newSecret,
  newWebhookId,
  WEBHOOK_ID,
  webhookBody,
  webhookNotFound,
  type WebhookRecord,
} from './webhooks.js';

export const DELIVERY_SERVICE_NAME = 'agentroom.delivery.v1.DeliveryService';

/** An endpoint on the wire: never its secret. */
function toProtoWebhook(webhook: WebhookRecord, attempts: AttemptRecord[]): Webhook {
  return {
    id: webhook.id,
    agentId: webhook.agentId,
    url: webhook.url,
    events: [...webhook.events],
    enabled: webhook.enabled,
    disabledReason: webhook.disabledReason,
    createdAt: webhook.createdAt,
    failuresInARow: webhook.failuresInARow,
    recentAttempts: attempts.map((attempt) => ({ ...attempt })),
  };
}

export interface DeliveryHandlersOptions {
  store: DeliveryStore;
  /** Which targets endpoints may name (WEBHOOKS_ALLOW_PRIVATE_TARGETS). */
  policy: OutboundPolicy;
  /** DNS resolution of endpoints' hosts at creation (tests). */
  lookup?: ((hostname: string) => Promise<ResolvedAddress[]>) | undefined;
}

/** The DeliveryService over a store: thin wiring; rules live in webhooks.ts. */
export function deliveryHandlers(server: GrpcServer, options: DeliveryHandlersOptions): DeliveryServiceHandlers {
  const { store, policy, lookup } = options;

  /** The agent's endpoint; another agent's, or none, is webhook-not-found. */
  async function owned(agentId: string, webhookId: string): Promise<WebhookRecord> {
    if (!WEBHOOK_ID.test(webhookId)) throw webhookNotFound(webhookId);
    const webhook = await store.getWebhook(agentId, webhookId);
    if (!webhook) throw webhookNotFound(webhookId);
    return webhook;
  }

  async function withAttempts(webhook: WebhookRecord): Promise<Webhook> {
    return toProtoWebhook(webhook, await store.recentAttempts(webhook.agentId, webhook.id));
  }

  return {
    CreateWebhook: server.unary('CreateWebhook', async (request) => {
      const agentId = checkAgentId(request.agentId);
      const events = checkEvents(request.events);
      await checkTarget(request.url, policy, lookup);
      const secret = newSecret();
      const webhook: WebhookRecord = {
        id: newWebhookId(),
        agentId,
        url: request.url,
        events,
        enabled: true,
        disabledReason: '',
        createdAt: new Date().toISOString(),
        failuresInARow: 0,
        secret,
      };
      if (!(await store.createWebhook(webhook, MAX_WEBHOOKS))) {
        throw new DomainError('too-many-webhooks', { detail: `You have ${MAX_WEBHOOKS} webhooks already, the most an agent may have.` });
      }
      return { webhook: toProtoWebhook(webhook, []), secret };
    }),

    ListWebhooks: server.unary('ListWebhooks', async (request) => {
      const agentId = checkAgentId(request.agentId);
      const webhooks = await store.listWebhooks(agentId);
      return { webhooks: await Promise.all(webhooks.map(withAttempts)) };
    }),

    GetWebhook: server.unary('GetWebhook', async (request) => {
      const webhook = await owned(checkAgentId(request.agentId), request.webhookId);
      return { webhook: await withAttempts(webhook) };
    }),

    DeleteWebhook: server.unary('DeleteWebhook', async (request) => {
      const agentId = checkAgentId(request.agentId);
      if (!WEBHOOK_ID.test(request.webhookId) || !(await store.deleteWebhook(agentId, request.webhookId))) throw webhookNotFound(request.webhookId);
      return {};
    }),

    RotateWebhookSecret: server.unary('RotateWebhookSecret', async (request) => {
      const agentId = checkAgentId(request.agentId);
      await owned(agentId, request.webhookId);
      const secret = newSecret();
      const webhook = await store.setSecret(agentId, request.webhookId, secret);
      if (!webhook) throw webhookNotFound(request.webhookId);
      return { webhook: await withAttempts(webhook), secret };
    }),

    EnableWebhook: server.unary('EnableWebhook', async (request) => {
      const agentId = checkAgentId(request.agentId);
      await owned(agentId, request.webhookId);
      const webhook = await store.enableWebhook(agentId, request.webhookId);
      if (!webhook) throw webhookNotFound(request.webhookId);
      return { webhook: await withAttempts(webhook) };
    }),

    SendTestEvent: server.unary('SendTestEvent', async (request) => {
      const agentId = checkAgentId(request.agentId);
      const webhook = await owned(agentId, request.webhookId);
      const now = new Date().toISOString();
      const messageId = messageIdOf(`test_${Date.now()}_${Math.floor(Math.random() * 1e9)}`, webhook.id);
      const body = webhookBody('test', now, { webhook_id: webhook.id, message: 'a test event from Agent Room' });
      await store.enqueue([{ messageId, agentId, webhookId: webhook.id, eventType: 'test', body, createdAt: now, attempt: 1 }]);
      return { messageId };
    }),
  };
}

export interface DeliveryGrpcServerOptions extends DeliveryHandlersOptions {
  log: Logger;
}

/** A gRPC server with the delivery service and health registered, not yet listening. */
export function createDeliveryGrpcServer(options: DeliveryGrpcServerOptions): GrpcServer {
  const server = new GrpcServer('delivery', options.log);
  const handlers = deliveryHandlers(server, options);
  server.addService(DELIVERY_SERVICE_NAME, deliveryProto().DeliveryService.service, handlers as grpc.UntypedServiceImplementation);
  return server;
}
