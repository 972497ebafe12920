import type { LeaseStore } from '@agentroom/kit/store';
import type { AttemptRecord, DeliveryJob, WebhookRecord } from './webhooks.js';

/** A job as the queue hands it to one worker: `entryId` acks or reschedules it. */
export interface QueuedJob {
  entryId: string;
  job: DeliveryJob;
}

/** How an attempt ended, as the endpoint's state counts it. */
export type AttemptOutcome = 'delivered' | 'failed' | 'gone';

/**
 * Where delivery keeps endpoints (per agent), their last attempts, the durable queue of deliveries
 * (a consumer group every replica reads; retries scheduled by due time) and the follower's lease and
 * position. Two implementations, Redis and memory, held to one contract test suite.
 */
export interface DeliveryStore extends LeaseStore {
  readonly kind: 'redis' | 'memory';
  /** Adds an endpoint unless the agent has `max` already (false then). */
  createWebhook(webhook: WebhookRecord, max: number): Promise<boolean>;
  /** An agent's endpoints, oldest first. */
  listWebhooks(agentId: string): Promise<WebhookRecord[]>;
  getWebhook(agentId: string, webhookId: string): Promise<WebhookRecord | undefined>;
  /** Removes an endpoint and its attempts; false when the agent has none with that id. */
  deleteWebhook(agentId: string, webhookId: string): Promise<boolean>;
  /** A new secret, used from the next attempt on; undefined when there is no such endpoint. */
  setSecret(agentId: string, webhookId: string, secret: string): Promise<WebhookRecord | undefined>;
  /** Enabled again, its failures in a row reset; undefined when there is no such endpoint. */
  enableWebhook(agentId: string, webhookId: string): Promise<WebhookRecord | undefined>;
  /**
   * Keeps the attempt (the last RECENT_ATTEMPTS of the endpoint) and counts it, in one step:
   * `delivered` resets the failures in a row; `failed` adds one, and disables the endpoint at
   * `maxFailures`; `gone` disables it. Answers whether this attempt disabled it, or undefined when
   * the endpoint is gone (nothing kept).
   */
  recordAttempt(
    agentId: string,
    webhookId: string,
    attempt: AttemptRecord,
    outcome: AttemptOutcome,
    maxFailures: number,
  ): Promise<{ disabled: boolean } | undefined>;
  /** The endpoint's last attempts, newest first. */
  recentAttempts(agentId: string, webhookId: string): Promise<AttemptRecord[]>;

  /** Queues deliveries, durably, in order. */
  enqueue(jobs: DeliveryJob[]): Promise<void>;
  /**
   * Up to `count` jobs for `consumer`: first those another consumer took and left unacknowledged for
   * `idleMs` (it died), then new ones, waiting up to `blockMs` when there is none. A job stays this
   * consumer's until acked or rescheduled. With `idleMs` undefined, new ones only: a worker looks
   * for abandoned jobs every so often, not at each read.
   */
  claim(consumer: string, count: number, idleMs: number | undefined, blockMs: number): Promise<QueuedJob[]>;
  /** Done with: removed from the queue. */
  ack(entryId: string): Promise<void>;
  /** Removed from the queue and scheduled for `dueAt` (ms since the epoch) as `job`, in one step. */
  reschedule(entryId: string, job: DeliveryJob, dueAt: number): Promise<void>;
  /** Moves up to `limit` scheduled jobs due at `now` back to the queue, each once, in one step; answers how many. */
  promoteDue(now: number, limit: number): Promise<number>;
  /** Jobs waiting: queued (in flight included) plus scheduled. */
  depth(): Promise<number>;
  /**
   * How long (ms) the oldest job waiting has waited at `now`: a queued one (in flight included) since
   * it was queued, a scheduled retry since it fell due; 0 when none waits.
   */
  oldestAgeMs(now: number): Promise<number>;
  /** Throws when storage cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
  /** Drops its connections at once, as a process that died would (tests). */
  crash(): void;
}
