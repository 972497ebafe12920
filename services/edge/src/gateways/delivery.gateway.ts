import * as grpc from '@grpc/grpc-js';
import { clientOptions, HealthChecker, type HealthStatus, unaryCall } from '@agentroom/kit/grpc';
import {
  type CreateWebhookResponse__Output,
  deliveryProto,
  type DeliveryServiceClient,
  type EnableWebhookResponse__Output,
  type ListWebhooksResponse__Output,
  type RotateWebhookSecretResponse__Output,
  type SendTestEventResponse__Output,
  type Webhook__Output,
} from '@agentroom/proto';
import type { Webhook } from '@agentroom/api';

function toWebhook(webhook: Webhook__Output): Webhook {
  return {
    id: webhook.id,
    url: webhook.url,
    events: webhook.events as Webhook['events'],
    enabled: webhook.enabled,
    disabled_reason: webhook.disabledReason === '' ? null : webhook.disabledReason,
    failures_in_a_row: webhook.failuresInARow,
    created_at: webhook.createdAt,
    recent_attempts: webhook.recentAttempts.map((attempt) => ({
      message_id: attempt.messageId,
      event_type: attempt.eventType,
      // 0 on the wire: no HTTP answer at all.
      status: attempt.status === 0 ? null : attempt.status,
      error: attempt.error === '' ? null : attempt.error,
      at: attempt.at,
      attempt: attempt.attempt,
      duration_ms: attempt.durationMs,
    })),
  };
}

function answered<T>(value: T | null, what: string): T {
  if (value === null) throw new Error(`${what} answered no webhook`);
  return value;
}

/** The delivery service as edge sees it: typed Promises, a deadline on every call, API shapes out. Every call acts for the token's agent. */
export class DeliveryGateway {
  private readonly client: DeliveryServiceClient;
  private readonly health: HealthChecker;

  constructor(
    address: string,
    private readonly deadlineMs: number,
  ) {
    const DeliveryService = deliveryProto().DeliveryService;
    this.client = new DeliveryService(address, grpc.credentials.createInsecure(), clientOptions(DeliveryService.service));
    this.health = new HealthChecker(address);
  }

  async createWebhook(agentId: string, url: string, events: string[]): Promise<Webhook & { secret: string }> {
    const response = await unaryCall<CreateWebhookResponse__Output>(this.deadlineMs, (metadata, options, callback) => this.client.createWebhook({ agentId, url, events }, metadata, options, callback));
    return { ...toWebhook(answered(response.webhook, 'CreateWebhook')), secret: response.secret };
  }

  async listWebhooks(agentId: string): Promise<Webhook[]> {
    const response = await unaryCall<ListWebhooksResponse__Output>(this.deadlineMs, (metadata, options, callback) => this.client.listWebhooks({ agentId }, metadata, options, callback), { repeatable: true });
    return response.webhooks.map(toWebhook);
  }

  async deleteWebhook(agentId: string, webhookId: string): Promise<void> {
    await unaryCall(this.deadlineMs, (metadata, options, callback) => this.client.deleteWebhook({ agentId, webhookId }, metadata, options, callback));
  }

  async rotateSecret(agentId: string, webhookId: string): Promise<Webhook & { secret: string }> {
    const response = await unaryCall<RotateWebhookSecretResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.rotateWebhookSecret({ agentId, webhookId }, metadata, options, callback),
    );
    return { ...toWebhook(answered(response.webhook, 'RotateWebhookSecret')), secret: response.secret };
  }

  async enableWebhook(agentId: string, webhookId: string): Promise<Webhook> {
    const response = await unaryCall<EnableWebhookResponse__Output>(this.deadlineMs, (metadata, options, callback) => this.client.enableWebhook({ agentId, webhookId }, metadata, options, callback));
    return toWebhook(answered(response.webhook, 'EnableWebhook'));
  }

  async sendTestEvent(agentId: string, webhookId: string): Promise<string> {
    const response = await unaryCall<SendTestEventResponse__Output>(this.deadlineMs, (metadata, options, callback) => this.client.sendTestEvent({ agentId, webhookId }, metadata, options, callback));
    return response.messageId;
  }

  check(): Promise<HealthStatus> {
    return this.health.check('agentroom.delivery.v1.DeliveryService', this.deadlineMs);
  }

  close(): void {
    this.client.close();
    this.health.close();
  }
}
