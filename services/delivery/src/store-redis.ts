import { duplicateClient, Keyspace, LuaScript, type RedisClient, streamFields, RedisLeaseStore } from '@agentroom/kit/store';
import { z } from 'zod';
import type { AttemptOutcome, DeliveryStore, QueuedJob } from './store.js';
import { type AttemptRecord, type DeliveryJob, EVENT_TYPES, FAILURES_REASON, GONE_REASON, RECENT_ATTEMPTS, type WebhookRecord } from './webhooks.js';

const GROUP = 'workers';

// An endpoint ARGV[2] (JSON) added to the agent's hash KEYS[1] under ARGV[1], unless it holds ARGV[3] already: 1, else 0.
const CREATE = new LuaScript(`
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`);

// Changes the endpoint ARGV[1] of the hash KEYS[1]: ARGV[2] 'secret' (to ARGV[3]) or 'enable'. Answers its JSON, or nil.
const UPDATE = new LuaScript(`
local json = redis.call('HGET', KEYS[1], ARGV[1])
if not json then return false end
local webhook = cjson.decode(json)
if ARGV[2] == 'secret' then
  webhook.secret = ARGV[3]
else
  webhook.enabled = true
  webhook.disabledReason = ''
  webhook.failuresInARow = 0
end
json = cjson.encode(webhook)
redis.call('HSET', KEYS[1], ARGV[1], json)
return json
`);

// The attempt ARGV[2] (JSON) of the endpoint ARGV[1] (hash KEYS[1]) pushed on its list KEYS[2] (the last ARGV[5] kept) and
// counted as ARGV[3] (delivered, failed, gone; ARGV[4] failures in a row disable): -1 when the endpoint is gone,
// 1 when this attempt disabled it, else 0.
const RECORD_ATTEMPT = new LuaScript(`
local json = redis.call('HGET', KEYS[1], ARGV[1])
if not json then return -1 end
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[5]) - 1)
local webhook = cjson.decode(json)
local disabled = 0
if ARGV[3] == 'delivered' then
  webhook.failuresInARow = 0
else
  webhook.failuresInARow = (tonumber(webhook.failuresInARow) or 0) + 1
  local reason = nil
  if ARGV[3] == 'gone' then reason = ARGV[6] elseif webhook.failuresInARow >= tonumber(ARGV[4]) then reason = ARGV[7] end
  if reason and webhook.enabled then
    webhook.enabled = false
    webhook.disabledReason = reason
    disabled = 1
  end
end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(webhook))
return disabled
`);

const DELETE = new LuaScript(`
local removed = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return removed
`);

// Done with the entry ARGV[1] of the stream KEYS[1]: acked and deleted, so the stream's length is the queue's.
const ACK = new LuaScript(`
redis.call('XACK', KEYS[1], ARGV[2], ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
`);

// The entry ARGV[1] acked and deleted, and the job ARGV[3] scheduled in KEYS[2] at ARGV[4], in one step.
const RESCHEDULE = new LuaScript(`
redis.call('XACK', KEYS[1], ARGV[2], ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
return 1
`);

// Up to ARGV[2] jobs of the schedule KEYS[2] due at ARGV[1] moved to the stream KEYS[1], each once: answers how many.
const PROMOTE = new LuaScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, job in ipairs(due) do
  redis.call('XADD', KEYS[1], '*', 'job', job)
  redis.call('ZREM', KEYS[2], job)
end
return #due
`);

const webhookSchema = z.object({
  id: z.string(),
  agentId: z.string(),
  url: z.string(),
  // cjson writes an empty array as {}: never stored so (events are never empty), read as none.
  events: z.union([z.array(z.enum(EVENT_TYPES)), z.object({}).transform(() => [])]),
  enabled: z.boolean(),
  disabledReason: z.string(),
  createdAt: z.string(),
  failuresInARow: z.number().int(),
  secret: z.string(),
});

const attemptSchema = z.object({
  messageId: z.string(),
  eventType: z.enum([...EVENT_TYPES, 'test']),
  status: z.number().int(),
  error: z.string(),
  at: z.string(),
  attempt: z.number().int(),
  durationMs: z.number().int(),
});

const jobSchema = z.object({
  messageId: z.string(),
  agentId: z.string(),
  webhookId: z.string(),
  eventType: z.enum([...EVENT_TYPES, 'test']),
  body: z.string(),
  createdAt: z.string(),
  attempt: z.number().int().min(1),
  traceparent: z.string().max(64).optional(),
});

function parse<T>(schema: z.ZodType<T>, json: string | null | undefined): T | undefined {
  if (json === null || json === undefined) return undefined;
  try {
    const parsed = schema.safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** An XREADGROUP / XAUTOCLAIM entry; a deleted one (nil fields) has none. */
type ClaimedEntry = [string, string[] | null];

/**
 * Delivery in Redis. Each agent's endpoints are one hash, and each endpoint's attempts one list,
 * under the agent's `{<agent id>}` hash tag (one script updates an endpoint and its attempts on a
 * Redis Cluster too). The queue is the stream `{queue}:stream` with the consumer group `workers`
 * every replica reads (XREADGROUP; jobs of a consumer that died are taken over by XAUTOCLAIM after
 * the idle time), and retries wait in the sorted set `{queue}:scheduled` by due time, moved back by
 * a script: both under one tag. A job done with is acked and deleted, so the stream's length is the
 * queue's. The follower's lease and position are under `{follower}`.
 */
export class RedisDeliveryStore implements DeliveryStore {
  readonly kind = 'redis';
  private readonly keys: Keyspace;
  private readonly streamKey: string;
  private readonly scheduledKey: string;
  /** Who follows the feed now, and where it is: one slot, as kit's RedisLeaseStore needs. */
  private readonly lease: RedisLeaseStore;
  /** Blocking reads wait on their own connection, so that they hold nothing else up. */
  private reader: RedisClient | undefined;
  private group: Promise<void> | undefined;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.keys = new Keyspace(prefix, 'delivery');
    this.streamKey = this.keys.key('queue', 'stream');
    this.scheduledKey = this.keys.key('queue', 'scheduled');
    this.lease = new RedisLeaseStore(this.redis, this.keys.key('follower', 'lease'), this.keys.key('follower', 'position'));
  }

  private webhooksKey(agentId: string): string {
    return this.keys.key(agentId, 'webhooks');
  }

  private attemptsKey(agentId: string, webhookId: string): string {
    return this.keys.key(agentId, 'webhook', webhookId, 'attempts');
  }

  async createWebhook(webhook: WebhookRecord, max: number): Promise<boolean> {
    return Number(await CREATE.run(this.redis, [this.webhooksKey(webhook.agentId)], [webhook.id, JSON.stringify(webhook), String(max)])) === 1;
  }

  async listWebhooks(agentId: string): Promise<WebhookRecord[]> {
    const all = await this.redis.hvals(this.webhooksKey(agentId));
    return all.flatMap((json) => parse(webhookSchema, json) ?? []).sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  async getWebhook(agentId: string, webhookId: string): Promise<WebhookRecord | undefined> {
    return parse(webhookSchema, await this.redis.hget(this.webhooksKey(agentId), webhookId));
  }

  async deleteWebhook(agentId: string, webhookId: string): Promise<boolean> {
    return Number(await DELETE.run(this.redis, [this.webhooksKey(agentId), this.attemptsKey(agentId, webhookId)], [webhookId])) === 1;
  }

  async setSecret(agentId: string, webhookId: string, secret: string): Promise<WebhookRecord | undefined> {
    return parse(webhookSchema, (await UPDATE.run(this.redis, [this.webhooksKey(agentId)], [webhookId, 'secret', secret])) as string | null);
  }

  async enableWebhook(agentId: string, webhookId: string): Promise<WebhookRecord | undefined> {
    return parse(webhookSchema, (await UPDATE.run(this.redis, [this.webhooksKey(agentId)], [webhookId, 'enable'])) as string | null);
  }

  async recordAttempt(
    agentId: string,
    webhookId: string,
    attempt: AttemptRecord,
    outcome: AttemptOutcome,
    maxFailures: number,
  ): Promise<{ disabled: boolean } | undefined> {
    const answer = Number(
      await RECORD_ATTEMPT.run(
        this.redis,
        [this.webhooksKey(agentId), this.attemptsKey(agentId, webhookId)],
        [webhookId, JSON.stringify(attempt), outcome, String(maxFailures), String(RECENT_ATTEMPTS), GONE_REASON, FAILURES_REASON],
      ),
    );
    return answer < 0 ? undefined : { disabled: answer === 1 };
  }

  async recentAttempts(agentId: string, webhookId: string): Promise<AttemptRecord[]> {
    const all = await this.redis.lrange(this.attemptsKey(agentId, webhookId), 0, RECENT_ATTEMPTS - 1);
    return all.flatMap((json) => parse(attemptSchema, json) ?? []);
  }

  /** The consumer group, made once (from the stream's start, so no job queued before it is missed). */
  private ensureGroup(): Promise<void> {
    this.group ??= this.redis.xgroup('CREATE', this.streamKey, GROUP, '0', 'MKSTREAM').then(
      () => undefined,
      (error: unknown) => {
        if (error instanceof Error && error.message.includes('BUSYGROUP')) return;
        this.group = undefined;
        throw error;
      },
    );
    return this.group;
  }

  async enqueue(jobs: DeliveryJob[]): Promise<void> {
    await Promise.all(jobs.map((job) => this.redis.xadd(this.streamKey, '*', 'job', JSON.stringify(job))));
  }

  private toQueued(entries: ClaimedEntry[]): { jobs: QueuedJob[]; broken: string[] } {
    const jobs: QueuedJob[] = [];
    const broken: string[] = [];
    for (const [entryId, fields] of entries) {
      const job = fields ? parse(jobSchema, streamFields(fields).get('job')) : undefined;
      if (job) jobs.push({ entryId, job });
      else broken.push(entryId);
    }
    return { jobs, broken };
  }

  async claim(consumer: string, count: number, idleMs: number | undefined, blockMs: number): Promise<QueuedJob[]> {
    await this.ensureGroup();
    const abandoned =
      idleMs === undefined
        ? []
        : ((await this.redis.xautoclaim(this.streamKey, GROUP, consumer, idleMs, '0-0', 'COUNT', count)) as [string, ClaimedEntry[], string[]?])[1];
    const taken = this.toQueued(abandoned);
    let jobs = taken.jobs;
    const broken = [...taken.broken];
    if (jobs.length < count) {
      const reader = jobs.length > 0 || blockMs <= 0 ? this.redis : this.readerConnection();
      const read = (
        jobs.length > 0 || blockMs <= 0
          ? await reader.xreadgroup('GROUP', GROUP, consumer, 'COUNT', count - jobs.length, 'STREAMS', this.streamKey, '>')
          : await reader.xreadgroup('GROUP', GROUP, consumer, 'COUNT', count, 'BLOCK', blockMs, 'STREAMS', this.streamKey, '>')
      ) as [string, ClaimedEntry[]][] | null;
      const fresh = this.toQueued(read?.[0]?.[1] ?? []);
      jobs = [...jobs, ...fresh.jobs];
      broken.push(...fresh.broken);
    }
    // An entry that holds no job (never written so) is dropped, not handed out forever.
    await Promise.all(broken.map((entryId) => this.ack(entryId)));
    return jobs;
  }

  private readerConnection(): RedisClient {
    this.reader ??= duplicateClient(this.redis, 'delivery-queue');
    return this.reader;
  }

  async ack(entryId: string): Promise<void> {
    await ACK.run(this.redis, [this.streamKey], [entryId, GROUP]);
  }

  async reschedule(entryId: string, job: DeliveryJob, dueAt: number): Promise<void> {
    await RESCHEDULE.run(this.redis, [this.streamKey, this.scheduledKey], [entryId, GROUP, JSON.stringify(job), String(dueAt)]);
  }

  async promoteDue(now: number, limit: number): Promise<number> {
    return Number(await PROMOTE.run(this.redis, [this.streamKey, this.scheduledKey], [String(now), String(limit)]));
  }

  async depth(): Promise<number> {
    const [length, scheduled] = await Promise.all([this.redis.xlen(this.streamKey), this.redis.zcard(this.scheduledKey)]);
    return length + scheduled;
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

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    this.reader?.disconnect();
    this.reader = undefined;
  }

  crash(): void {
    this.reader?.disconnect();
    this.redis.disconnect();
  }
}
