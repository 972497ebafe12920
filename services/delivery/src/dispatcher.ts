import type { ClientReadableStream } from '@grpc/grpc-js';
import type { Logger } from '@agentroom/kit/log';
import { LeasedFollower, type LeasedFollowerOptions } from '@agentroom/kit/store';
import { notificationTypeOf, toNotification } from '@agentroom/api/wire';
import type { WatchEventsResponse__Output } from '@agentroom/proto';
import type { DeliveryStore } from './store.js';
import { type DeliveryJob, messageIdOf, webhookBody } from './webhooks.js';

/** Messaging's events after `afterId`, oldest first, for as long as the call lives (WatchEvents). */
export type WatchEvents = (afterId: string) => ClientReadableStream<WatchEventsResponse__Output>;

export type DispatcherOptions = LeasedFollowerOptions;

/** The most events handled in one step. */
const BATCH = 64;

/**
 * Turns messaging's events into deliveries: follows WatchEvents from the position kept in the store
 * under its lease (kit's LeasedFollower: one replica at a time), and queues, for each event, one job
 * per enabled endpoint of that agent subscribed to its type, every event waiting in one step (a
 * batch); the position moves on once they are queued. An event handed over again (a crash between
 * the queueing and the position's move, or a batch that failed part way) is queued again under the
 * same webhook message ids: receivers see a repeat, never a miss.
 */
export class Dispatcher {
  private readonly follower: LeasedFollower<WatchEventsResponse__Output, WatchEventsResponse__Output>;

  constructor(
    private readonly store: DeliveryStore,
    watchEvents: WatchEvents,
    log: Logger,
    options: DispatcherOptions = {},
  ) {
    this.follower = new LeasedFollower(
      store,
      {
        words: { follower: 'the dispatcher', source: 'messaging', item: 'event' },
        // No position stored (a new deployment): events from about now on, by this clock.
        newest: () => Promise.resolve(`${Date.now()}-0`),
        watch: watchEvents,
        itemOf: (response) => (response.id !== '' && response.notification ? response : undefined),
        idOf: (event) => event.id,
        // Every event waiting, at most BATCH: a burst costs a few round trips per batch, not per event.
        handleBatch: (events) => this.handle(events),
        maxBatch: BATCH,
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

  /**
   * A batch of events, in order: the endpoints of each agent they concern read at once (one round
   * trip), then every job of the batch queued at once, in the events' order.
   */
  private async handle(events: WatchEventsResponse__Output[]): Promise<void> {
    const typed = events.flatMap((event) => {
      const notification = event.notification;
      const type = notification ? notificationTypeOf(notification) : undefined;
      return notification && type !== undefined ? [{ event, notification, type }] : [];
    });
    if (typed.length === 0) return;
    const agentIds = [...new Set(typed.map(({ event }) => event.agentId))];
    const webhooks = new Map(await Promise.all(agentIds.map(async (agentId) => [agentId, await this.store.listWebhooks(agentId)] as const)));
    const jobs: DeliveryJob[] = [];
    for (const { event, notification, type } of typed) {
      const endpoints = (webhooks.get(event.agentId) ?? []).filter((webhook) => webhook.enabled && webhook.events.includes(type));
      if (endpoints.length === 0) continue;
      // The notification exactly as REST's listNotifications answers it (one mapper, @agentroom/api/wire).
      const body = webhookBody(type, notification.createdAt, toNotification(notification));
      for (const webhook of endpoints) {
        jobs.push({
          messageId: messageIdOf(event.id, webhook.id),
          agentId: event.agentId,
          webhookId: webhook.id,
          eventType: type,
          body,
          createdAt: notification.createdAt,
          attempt: 1,
          ...(event.traceparent === '' ? {} : { traceparent: event.traceparent }),
        });
      }
    }
    if (jobs.length > 0) await this.store.enqueue(jobs);
  }
}
