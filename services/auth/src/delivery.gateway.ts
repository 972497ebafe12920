import * as grpc from '@grpc/grpc-js';
import { clientOptions, unaryCall } from '@agentroom/kit/grpc';
import { deliveryProto, type DeliveryServiceClient, type ListWebhooksResponse__Output } from '@agentroom/proto';

/** A webhook as /account shows it to the agent's human: never its secret (the wire never carries it). */
export interface AgentWebhook {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  /** Why it was disabled; null while enabled. */
  disabledReason: string | null;
  failuresInARow: number;
  /** RFC 3339. */
  createdAt: string;
  /** The last attempts, newest first. */
  attempts: { eventType: string; status: number | null; error: string | null; at: string }[];
}

/** What the account page reads of the delivery service. */
export interface WebhookReader {
  webhooksOf(agentId: string): Promise<AgentWebhook[]>;
}

/**
 * The delivery service as auth sees it: the webhooks of an agent, for its human's account page
 * (docs/decisions.md §23). A deadline on every call; a read, so it may go again to another replica.
 */
export class DeliveryGateway implements WebhookReader {
  private readonly client: DeliveryServiceClient;

  constructor(
    address: string,
    private readonly deadlineMs: number,
  ) {
    const DeliveryService = deliveryProto().DeliveryService;
    this.client = new DeliveryService(address, grpc.credentials.createInsecure(), clientOptions(DeliveryService.service));
  }

  async webhooksOf(agentId: string): Promise<AgentWebhook[]> {
    const response = await unaryCall<ListWebhooksResponse__Output>(this.deadlineMs, (metadata, options, callback) => this.client.listWebhooks({ agentId }, metadata, options, callback), { repeatable: true });
    return response.webhooks.map((webhook) => ({
      id: webhook.id,
      url: webhook.url,
      events: webhook.events,
      enabled: webhook.enabled,
      disabledReason: webhook.disabledReason === '' ? null : webhook.disabledReason,
      failuresInARow: webhook.failuresInARow,
      createdAt: webhook.createdAt,
      // 0 on the wire: no HTTP answer at all.
      attempts: webhook.recentAttempts.map((attempt) => ({ eventType: attempt.eventType, status: attempt.status === 0 ? null : attempt.status, error: attempt.error === '' ? null : attempt.error, at: attempt.at })),
    }));
  }

  close(): void {
    this.client.close();
  }
}
