import { type Clock, StreamIds, systemClock, MemoryLeaseStore } from '@agentroom/kit/store';
import type { AttemptOutcome, DeliveryStore, QueuedJob } from './store.js';
import { type AttemptRecord, type DeliveryJob, FAILURES_REASON, GONE_REASON, RECENT_ATTEMPTS, type WebhookRecord } from './webhooks.js';

interface Entry {
  id: string;
  job: DeliveryJob;
  /** Who holds it, and since when; undefined until a consumer takes it. */
  consumer: string | undefined;
  deliveredAt: number;
}

/**
 * The embedded default: everything in this process's memory, lost on restart. The queue behaves as
 * Redis's consumer group does: a job taken and not acked is taken over after the idle time.
 */
export class MemoryDeliveryStore implements DeliveryStore {
  readonly kind = 'memory';
  private readonly webhooks = new Map<string, WebhookRecord[]>();
  private readonly attempts = new Map<string, AttemptRecord[]>();
  /** The queue, oldest first. */
  private readonly entries = new Map<string, Entry>();
  private scheduled: { dueAt: number; job: DeliveryJob }[] = [];
  private readonly ids = new StreamIds(() => this.clock.now());
  private readonly waiters = new Set<() => void>();
  /** Who follows messaging's events now, and where it is. */
  private readonly lease: MemoryLeaseStore;

  constructor(private readonly clock: Clock = systemClock) {
    this.lease = new MemoryLeaseStore(clock);
  }

  private copy(webhook: WebhookRecord): WebhookRecord {
    return { ...webhook, events: [...webhook.events] };
  }

  private find(agentId: string, webhookId: string): WebhookRecord | undefined {
    return this.webhooks.get(agentId)?.find((webhook) => webhook.id === webhookId);
  }

  createWebhook(webhook: WebhookRecord, max: number): Promise<boolean> {
    const list = this.webhooks.get(webhook.agentId) ?? [];
    if (list.length >= max) return Promise.resolve(false);
    list.push(this.copy(webhook));
    this.webhooks.set(webhook.agentId, list);
    return Promise.resolve(true);
  }

  listWebhooks(agentId: string): Promise<WebhookRecord[]> {
    return Promise.resolve((this.webhooks.get(agentId) ?? []).map((webhook) => this.copy(webhook)));
  }

  getWebhook(agentId: string, webhookId: string): Promise<WebhookRecord | undefined> {
    const found = this.find(agentId, webhookId);
    return Promise.resolve(found && this.copy(found));
  }

  deleteWebhook(agentId: string, webhookId: string): Promise<boolean> {
    const list = this.webhooks.get(agentId) ?? [];
    const kept = list.filter((webhook) => webhook.id !== webhookId);
    if (kept.length === list.length) return Promise.resolve(false);
    if (kept.length === 0) this.webhooks.delete(agentId);
    else this.webhooks.set(agentId, kept);
    this.attempts.delete(webhookId);
    return Promise.resolve(true);
  }

  private update(agentId: string, webhookId: string, change: (webhook: WebhookRecord) => void): Promise<WebhookRecord | undefined> {
    const found = this.find(agentId, webhookId);
    if (found) change(found);
    return Promise.resolve(found && this.copy(found));
  }

  setSecret(agentId: string, webhookId: string, secret: string): Promise<WebhookRecord | undefined> {
    return this.update(agentId, webhookId, (webhook) => (webhook.secret = secret));
  }

  enableWebhook(agentId: string, webhookId: string): Promise<WebhookRecord | undefined> {
    return this.update(agentId, webhookId, (webhook) => {
      webhook.enabled = true;
      webhook.disabledReason = '';
      webhook.failuresInARow = 0;
    });
  }

  recordAttempt(
    agentId: string,
    webhookId: string,
    attempt: AttemptRecord,
    outcome: AttemptOutcome,
    maxFailures: number,
  ): Promise<{ disabled: boolean } | undefined> {
    const webhook = this.find(agentId, webhookId);
    if (!webhook) return Promise.resolve(undefined);
    const kept = [{ ...attempt }, ...(this.attempts.get(webhookId) ?? [])].slice(0, RECENT_ATTEMPTS);
    this.attempts.set(webhookId, kept);
    let disabled = false;
    if (outcome === 'delivered') {
      webhook.failuresInARow = 0;
    } else {
      webhook.failuresInARow += 1;
      const reason = outcome === 'gone' ? GONE_REASON : webhook.failuresInARow >= maxFailures ? FAILURES_REASON : undefined;
      if (reason !== undefined && webhook.enabled) {
        webhook.enabled = false;
        webhook.disabledReason = reason;
        disabled = true;
      }
    }
    return Promise.resolve({ disabled });
  }

  recentAttempts(_agentId: string, webhookId: string): Promise<AttemptRecord[]> {
    return Promise.resolve((this.attempts.get(webhookId) ?? []).map((attempt) => ({ ...attempt })));
  }

  private wake(): void {
    for (const waiter of this.waiters) waiter();
    this.waiters.clear();
  }

  private push(job: DeliveryJob): void {
    const id = this.ids.next();
    this.entries.set(id, { id, job: { ...job }, consumer: undefined, deliveredAt: 0 });
  }

  enqueue(jobs: DeliveryJob[]): Promise<void> {
    for (const job of jobs) this.push(job);
    if (jobs.length > 0) this.wake();
    return Promise.resolve();
  }

  private take(consumer: string, count: number, idleMs: number | undefined): QueuedJob[] {
    const now = this.clock.now();
    const taken: QueuedJob[] = [];
    // Those left by a consumer for the idle time first, then new ones: as XAUTOCLAIM, then XREADGROUP >.
    if (idleMs !== undefined) {
      for (const entry of this.entries.values()) {
        if (taken.length >= count) break;
        if (entry.consumer !== undefined && now - entry.deliveredAt >= idleMs) taken.push(this.hand(entry, consumer, now));
      }
    }
    for (const entry of this.entries.values()) {
      if (taken.length >= count) break;
      if (entry.consumer === undefined) taken.push(this.hand(entry, consumer, now));
    }
    return taken;
  }

  private hand(entry: Entry, consumer: string, now: number): QueuedJob {
    entry.consumer = consumer;
    entry.deliveredAt = now;
    return { entryId: entry.id, job: { ...entry.job } };
  }

  async claim(consumer: string, count: number, idleMs: number | undefined, blockMs: number): Promise<QueuedJob[]> {
    const taken = this.take(consumer, count, idleMs);
    if (taken.length > 0 || blockMs <= 0) return taken;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, blockMs);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.waiters.add(done);
    });
    return this.take(consumer, count, idleMs);
  }

  ack(entryId: string): Promise<void> {
    this.entries.delete(entryId);
    return Promise.resolve();
  }

  reschedule(entryId: string, job: DeliveryJob, dueAt: number): Promise<void> {
    this.entries.delete(entryId);
    this.scheduled.push({ dueAt, job: { ...job } });
    return Promise.resolve();
  }

  promoteDue(now: number, limit: number): Promise<number> {
    const due = this.scheduled
      .filter((item) => item.dueAt <= now)
      .sort((a, b) => a.dueAt - b.dueAt)
      .slice(0, limit);
    if (due.length === 0) return Promise.resolve(0);
    this.scheduled = this.scheduled.filter((item) => !due.includes(item));
    for (const item of due) this.push(item.job);
    this.wake();
    return Promise.resolve(due.length);
  }

  depth(): Promise<number> {
    return Promise.resolve(this.entries.size + this.scheduled.length);
  }

  oldestAgeMs(now: number): Promise<number> {
    // Entries keep the order they were queued in, and an entry's id starts with its time (as Redis's).
    const [first] = this.entries.keys();
    const since = [first === undefined ? Infinity : Number(first.split('-')[0]), ...this.scheduled.map((item) => item.dueAt)];
    const oldest = Math.min(...since);
    return Promise.resolve(oldest <= now ? now - oldest : 0);
  }

  acquireLease(owner: string, ttlMs: number): Promise<boolean> {
    return this.lease.acquireLease(owner, ttlMs);
  }

  releaseLease(owner: string): Promise<void> {
    return this.lease.releaseLease(owner);
  }

  position(): Promise<string | undefined> {
    return this.lease.position();
  }

  advancePosition(owner: string, id: string): Promise<boolean> {
    return this.lease.advancePosition(owner, id);
  }

  ping(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.wake();
    return Promise.resolve();
  }

  crash(): void {
    this.wake();
  }
}
