import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { fetchGuarded, type OutboundPolicy, OutboundRefusal, type ResolvedAddress } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import { webhookDeliveries, webhookDeliveryLatency, webhookQueueDepth } from '@agentroom/kit/metrics';
import { pauseUnlessAborted as sleep } from '@agentroom/kit/process';
import { Webhook as Signer } from 'standardwebhooks';
import { currentBody, type RemovalLookup } from './removals.js';
import type { AttemptOutcome, DeliveryStore, QueuedJob } from './store.js';
import { type AttemptRecord, type DeliveryJob, MAX_FAILURES_IN_A_ROW, RETRY_DELAYS_MS, type WebhookRecord } from './webhooks.js';
import { inLinkedSpan, setSpanAttributes, SpanKind } from '@agentroom/kit/telemetry';

export const USER_AGENT = 'AgentRoom-Webhooks/1';

export interface WorkerOptions {
  /** Its consumer name in the queue's group: unique per process. */
  consumer?: string;
  /** Deliveries attempted at once. */
  concurrency?: number;
  /** A job taken by a worker and not acked for this long is taken over by another (ms). */
  claimIdleMs?: number;
  /** How long one read waits for new jobs (ms). */
  blockMs?: number;
  /** How often due retries are moved back to the queue (ms). */
  promoteEveryMs?: number;
  /** The wait caps before each retry (full jitter); past the last, a delivery is given up. */
  retryDelaysMs?: readonly number[];
  /** One attempt's limit (ms). */
  timeoutMs?: number;
  /** Which targets an attempt may reach (WEBHOOKS_ALLOW_PRIVATE_TARGETS). */
  policy?: OutboundPolicy;
  /** DNS resolution of endpoints' hosts (tests). */
  lookup?: (hostname: string) => Promise<ResolvedAddress[]>;
  /** [0, 1): the jitter's draw (tests). */
  random?: () => number;
  /** Whether the post an event is about was removed, asked before each attempt (removals.ts); unset, bodies go as queued. */
  removalOf?: RemovalLookup;
}

/** How long an attempt waits when the room cannot say whether its post was removed: nothing is sent meanwhile. */
const ROOM_RETRY_MS = 2_000;

export const CLAIM_IDLE_MS = 30_000;

/**
 * Attempts the queued deliveries: reads jobs from the queue's consumer group (those a dead worker
 * left first), POSTs each, signed with the endpoint's current secret, through the outbound guard,
 * then acks it (2xx; 410 disables the endpoint), or schedules its retry with exponential backoff and
 * full jitter, or gives it up after the last. Every replica runs one; a job is acked only once its
 * attempt is recorded, so a worker that dies mid-attempt leaves it to another: at least once.
 */
export class DeliveryWorker {
  readonly consumer: string;
  private readonly concurrency: number;
  private readonly claimIdleMs: number;
  private readonly blockMs: number;
  private readonly promoteEveryMs: number;
  private readonly retryDelaysMs: readonly number[];
  private readonly timeoutMs: number;
  private readonly policy: OutboundPolicy;
  private readonly lookup: WorkerOptions['lookup'];
  private readonly random: () => number;
  private readonly removalOf: RemovalLookup | undefined;
  /** Free slots that make a read worth it (a quarter of them): one read fetches several jobs, not one per attempt ended. */
  private readonly refillAt: number;
  /** How often the reads also take over jobs a dead worker left (their idle time is long: sooner would find none). */
  private readonly takeOverEveryMs: number;
  private readonly stopping = new AbortController();
  private readonly inFlight = new Set<Promise<void>>();
  private running: Promise<void> | undefined;
  private slotFreed: (() => void) | undefined;
  private troubled = false;

  constructor(
    private readonly store: DeliveryStore,
    private readonly log: Logger,
    options: WorkerOptions = {},
  ) {
    this.consumer = options.consumer ?? `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
    this.concurrency = options.concurrency ?? 64;
    this.claimIdleMs = options.claimIdleMs ?? CLAIM_IDLE_MS;
    this.blockMs = options.blockMs ?? 500;
    this.promoteEveryMs = options.promoteEveryMs ?? 500;
    this.retryDelaysMs = options.retryDelaysMs ?? RETRY_DELAYS_MS;
    this.timeoutMs = options.timeoutMs ?? 5_000;
    this.policy = options.policy ?? {};
    this.lookup = options.lookup;
    this.random = options.random ?? Math.random;
    this.removalOf = options.removalOf;
    this.refillAt = Math.max(1, Math.floor(this.concurrency / 4));
    this.takeOverEveryMs = Math.min(1_000, Math.max(1, Math.floor(this.claimIdleMs / 4)));
  }

  start(): void {
    this.running ??= Promise.all([this.work(), this.tend()]).then(() => undefined);
  }

  /** Takes no new job; the attempts in flight finish (and are acked or rescheduled). */
  async stop(): Promise<void> {
    this.stopping.abort();
    this.slotFreed?.();
    await this.running;
    await Promise.all(this.inFlight);
  }

  /** Stops taking jobs at once and leaves those in flight to their fate (tests: a worker that died). */
  abandon(): void {
    this.stopping.abort();
    this.slotFreed?.();
  }

  /** Moves due retries back to the queue, and reports the queue's depth. */
  private async tend(): Promise<void> {
    const stop = this.stopping.signal;
    while (!stop.aborted) {
      try {
        while ((await this.store.promoteDue(Date.now(), 100)) === 100 && !stop.aborted);
        webhookQueueDepth.set(await this.store.depth());
      } catch {
        // Storage unreachable: the reading loop reports it.
      }
      await sleep(this.promoteEveryMs, stop);
    }
  }

  private async work(): Promise<void> {
    const stop = this.stopping.signal;
    let failures = 0;
    let tookOverAt = Number.NEGATIVE_INFINITY;
    while (!stop.aborted) {
      const free = this.concurrency - this.inFlight.size;
      if (free < this.refillAt) {
        await new Promise<void>((resolve) => (this.slotFreed = resolve));
        continue;
      }
      let jobs: QueuedJob[];
      try {
        const now = Date.now();
        const takeOver = now - tookOverAt >= this.takeOverEveryMs;
        jobs = await this.store.claim(this.consumer, free, takeOver ? this.claimIdleMs : undefined, this.blockMs);
        if (takeOver) tookOverAt = now;
        if (this.troubled) this.log.info('the delivery worker reads its queue again');
        this.troubled = false;
        failures = 0;
      } catch (error) {
        if (stop.aborted) break;
        if (!this.troubled) this.log.warn({ err: error }, 'the delivery worker cannot read its queue (storage unreachable); it retries');
        this.troubled = true;
        failures += 1;
        await sleep(Math.min(100 * 2 ** failures, 5_000), stop);
        continue;
      }
      // Taken after the stop: left unacked, another worker takes them after the idle time.
      if (stop.aborted) break;
      // Each endpoint read once for the jobs of one read (a burst is mostly a few endpoints' jobs).
      const endpoints = new Map<string, Promise<WebhookRecord | undefined>>();
      const endpointOf = ({ agentId, webhookId }: DeliveryJob): Promise<WebhookRecord | undefined> => {
        const key = `${agentId}/${webhookId}`;
        let endpoint = endpoints.get(key);
        if (endpoint === undefined) {
          endpoint = this.store.getWebhook(agentId, webhookId);
          endpoints.set(key, endpoint);
        }
        return endpoint;
      };
      for (const queued of jobs) {
        const attempt = this.attempt(queued, endpointOf(queued.job))
          .catch((error: unknown) => {
            // Storage failed around the attempt: unacked, the job is attempted again after the idle time.
            if (!this.stopping.signal.aborted)
              this.log.warn({ err: error, messageId: queued.job.messageId }, 'a delivery could not be recorded; it is attempted again later');
          })
          .finally(() => {
            this.inFlight.delete(attempt);
            this.slotFreed?.();
            this.slotFreed = undefined;
          });
        this.inFlight.add(attempt);
      }
    }
  }

  /** One attempt of one job to its endpoint (as read when the job was), recorded, then acked or rescheduled. */
  /**
   * One attempt in a span of its own, a child of the span that appended the notification and linked
   * to it (docs/decisions.md §49): a post's trace shows its webhooks' attempts, retries included.
   */
  private attempt(queued: QueuedJob, endpoint: Promise<WebhookRecord | undefined>): Promise<void> {
    const { job } = queued;
    return inLinkedSpan(
      job.traceparent === undefined ? undefined : { traceparent: job.traceparent },
      'webhook delivery',
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'http.request.method': 'POST',
          'messaging.message.id': job.messageId,
          'agentroom.webhook.id': job.webhookId,
          'agentroom.webhook.event_type': job.eventType,
          'agentroom.webhook.attempt': job.attempt,
        },
      },
      () => this.attemptOnce(queued, endpoint),
    );
  }

  private async attemptOnce({ entryId, job }: QueuedJob, endpoint: Promise<WebhookRecord | undefined>): Promise<void> {
    const webhook = await endpoint;
    if (!webhook?.enabled) {
      // Deleted or disabled since it was queued: dropped.
      await this.store.ack(entryId);
      return;
    }
    let body = job.body;
    if (this.removalOf) {
      try {
        body = await currentBody(job.body, this.removalOf);
      } catch (error) {
        // Never the text of a post that may be removed: the same attempt, once the room answers.
        this.log.warn({ err: error, messageId: job.messageId }, 'the room could not say whether a post was removed; the attempt waits');
        await this.store.reschedule(entryId, job, Date.now() + ROOM_RETRY_MS);
        return;
      }
    }
    const at = new Date();
    const started = performance.now();
    let status = 0;
    let error = '';
    try {
      const response = await fetchGuarded(
        webhook.url,
        {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'user-agent': USER_AGENT,
            'webhook-id': job.messageId,
            'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
            // The secret of now: a rotation takes effect from the next attempt on.
            'webhook-signature': new Signer(webhook.secret).sign(job.messageId, at, body),
          },
          body,
          timeoutMs: this.timeoutMs,
          maxBytes: 0,
          readBody: false,
          ...(this.lookup ? { lookup: this.lookup } : {}),
        },
        this.policy,
      );
      status = response.status;
      if (status < 200 || status > 299) error = `the endpoint answered ${status}`;
    } catch (failure) {
      error = failure instanceof OutboundRefusal ? failure.message : 'the request failed';
    }
    const durationMs = Math.round(performance.now() - started);
    const outcome: AttemptOutcome = status >= 200 && status <= 299 ? 'delivered' : status === 410 ? 'gone' : 'failed';
    // The endpoint's host, not its URL, whose path or query may hold a receiver's secret.
    setSpanAttributes({
      'server.address': new URL(webhook.url).hostname,
      'agentroom.webhook.outcome': outcome,
      ...(status === 0 ? { 'error.type': 'request_failed' } : { 'http.response.status_code': status }),
    });
    const record: AttemptRecord = { messageId: job.messageId, eventType: job.eventType, status, error, at: at.toISOString(), attempt: job.attempt, durationMs };
    const recorded = await this.store.recordAttempt(job.agentId, job.webhookId, record, outcome, MAX_FAILURES_IN_A_ROW);
    const context = { messageId: job.messageId, webhookId: job.webhookId, attempt: job.attempt, status };
    if (outcome === 'delivered') {
      webhookDeliveries.inc({ outcome: 'delivered' });
      webhookDeliveryLatency.observe(Math.max(0, Date.now() - Date.parse(job.createdAt)) / 1000);
      this.log.debug({ ...context, durationMs }, 'webhook delivered');
      await this.store.ack(entryId);
      return;
    }
    if (outcome === 'failed') webhookDeliveries.inc({ outcome: 'failed_attempt' });
    if (recorded?.disabled === true || outcome === 'gone') {
      if (recorded?.disabled === true) webhookDeliveries.inc({ outcome: 'disabled' });
      this.log.info(
        { ...context, error },
        outcome === 'gone' ? 'webhook endpoint disabled: it answered 410 Gone' : 'webhook endpoint disabled: too many failures in a row',
      );
      await this.store.ack(entryId);
      return;
    }
    const cap = this.retryDelaysMs[job.attempt - 1];
    if (recorded === undefined || cap === undefined) {
      if (recorded !== undefined) {
        webhookDeliveries.inc({ outcome: 'gave_up' });
        this.log.info({ ...context, error }, 'webhook delivery given up after its last retry');
      }
      await this.store.ack(entryId);
      return;
    }
    const delay = Math.floor(this.random() * cap);
    this.log.debug({ ...context, error, retryInMs: delay }, 'webhook attempt failed; retry scheduled');
    await this.store.reschedule(entryId, { ...job, attempt: job.attempt + 1 }, Date.now() + delay);
  }
}
