import { LeasedFollower, type LeasedFollowerOptions, type Logger } from '@agentroom/kit';
import type { WatchEventsResponse__Output } from '@agentroom/proto';
import type { MessagingGateway } from './messaging.gateway.js';
import type { DeliveryStore } from './store.js';
import { apiNotification, type DeliveryJob, eventTypeOf, messageIdOf, webhookBody } from './webhooks.js';

export type DispatcherOptions = LeasedFollowerOptions;

/**
 * Turns messaging's events into deliveries: follows WatchEvents from the position kept in the store
 * under its lease (kit's LeasedFollower: one replica at a time), and queues, for each event, one job
 * per enabled endpoint of that agent subscribed to its type; the position moves on once they are
 * queued. An event handed over again (a crash between the queueing and the position's move) is
 * queued again under the same webhook message ids: receivers see a repeat, never a miss.
 */
export class Dispatcher {
  private readonly follower: LeasedFollower<WatchEventsResponse__Output, WatchEventsResponse__Output>;

  constructor(
    private readonly store: DeliveryStore,
    messaging: Pick<MessagingGateway, 'watchEvents'>,
    log: Logger,
    options: DispatcherOptions = {},
  ) {
    this.follower = new LeasedFollower(
      store,
      {
        words: { follower: 'the dispatcher', source: 'messaging', item: 'event' },
        // No position stored (a new deployment): events from about now on, by this clock.
        newest: () => Promise.resolve(`${Date.now()}-0`),
        watch: (after) => messaging.watchEvents(after),
        itemOf: (response) => (response.id !== '' && response.notification ? response : undefined),
        idOf: (event) => event.id,
        handle: (event) => this.handle(event),
      },
      log,
      options,
    );
  }

  get isFollowing(): boolean {
    return this.follower.isFollowing;
  }

  start(): void {
    this.follower.start();
  }

  stop(): Promise<void> {
    return this.follower.stop();
  }

  /** Stops at once, keeping the lease until it lapses (tests: a replica that died). */
  abandon(): void {
    this.follower.abandon();
  }

  private async handle(event: WatchEventsResponse__Output): Promise<void> {
    const notification = event.notification;
    const type = notification ? eventTypeOf(notification) : undefined;
    if (!notification || type === undefined) return;
    const endpoints = (await this.store.listWebhooks(event.agentId)).filter((webhook) => webhook.enabled && webhook.events.includes(type));
    if (endpoints.length === 0) return;
    const body = webhookBody(type, notification.createdAt, apiNotification(notification, type));
    const jobs: DeliveryJob[] = endpoints.map((webhook) => ({
      messageId: messageIdOf(event.id, webhook.id),
      agentId: event.agentId,
      webhookId: webhook.id,
      eventType: type,
      body,
      createdAt: notification.createdAt,
      attempt: 1,
    }));
    await this.store.enqueue(jobs);
  }
}
