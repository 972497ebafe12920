import client from 'prom-client';

/** One registry per process; every metric carries the `service` label, so embedded mode stays readable. */
export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry });

/** Metrics as `getMetricsAsJSON` gives them: what a thread hands to the one that serves `/metrics`. */
export type MetricsJson = Awaited<ReturnType<client.Registry['getMetricsAsJSON']>>;

/** Registries of this process's other threads (a worker has its own), read at each scrape. */
const threadSources = new Set<() => Promise<MetricsJson>>();

/** Adds another thread's metrics to this process's `/metrics`; the function returned removes them. */
export function addThreadMetrics(source: () => Promise<MetricsJson>): () => void {
  threadSources.add(source);
  return () => threadSources.delete(source);
}

/** This thread's own metrics (`agentroom_*`), for the thread that serves `/metrics`: the process's figures (memory, CPU, event loop) are that one's. */
export async function threadMetrics(): Promise<MetricsJson> {
  return (await registry.getMetricsAsJSON()).filter((metric) => metric.name.startsWith('agentroom_'));
}

/** This registry summed with those of the process's other threads, by name and labels. */
async function processRegistry(): Promise<client.Registry> {
  if (threadSources.size === 0) return registry;
  const others = await Promise.all([...threadSources].map((source) => source().catch((): MetricsJson => [])));
  return client.AggregatorRegistry.aggregate([await registry.getMetricsAsJSON(), ...others]);
}

/** The process's metrics in Prometheus' text, every thread's (what `/metrics` serves). */
export async function processMetrics(): Promise<string> {
  return (await processRegistry()).metrics();
}

/** The process's metrics as JSON, every thread's (tests read the embedded product's figures so). */
export async function processMetricsJson(): Promise<MetricsJson> {
  return (await processRegistry()).getMetricsAsJSON();
}

export const httpRequestDuration = new client.Histogram({
  name: 'agentroom_http_request_duration_seconds',
  help: 'HTTP requests served, by service, method, route and status.',
  labelNames: ['service', 'method', 'route', 'status'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  registers: [registry],
});

export const grpcHandledDuration = new client.Histogram({
  name: 'agentroom_grpc_server_handled_seconds',
  help: 'gRPC calls handled, by service, method and status code.',
  labelNames: ['service', 'method', 'code'] as const,
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  registers: [registry],
});

export const operationDuration = new client.Histogram({
  name: 'agentroom_operation_duration_seconds',
  help: 'Operations of the room run by edge, by operation, protocol (rest, mcp, a2a) and outcome (ok, replayed, or the problem slug).',
  labelNames: ['operation', 'protocol', 'outcome'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  registers: [registry],
});

export const quotaRejections = new client.Counter({
  name: 'agentroom_quota_rejections_total',
  help: 'Requests refused with 429 because the daily quota was spent.',
  labelNames: ['service'] as const,
  registers: [registry],
});

export const unreplicatedWrites = new client.Counter({
  name: 'agentroom_redis_unreplicated_writes_total',
  help: 'Posts and direct messages answered although fewer Redis replicas than REDIS_WAIT_REPLICAS had them within REDIS_WAIT_TIMEOUT_MS (docs/decisions.md §20).',
  labelNames: ['service'] as const,
  registers: [registry],
});

export const redisUp = new client.Gauge({
  name: 'agentroom_redis_up',
  help: "1 while this process's Redis connection (or Redis Cluster client) is ready for commands, 0 while it is lost and reconnecting, by service.",
  labelNames: ['service'] as const,
  registers: [registry],
});

export const feedbackReceived = new client.Counter({
  name: 'agentroom_feedback_received_total',
  help: 'Reports received through POST {api_url}/agent/feedback.',
  registers: [registry],
});

export const liveSubscribers = new client.Gauge({
  name: 'agentroom_live_subscribers',
  help: 'Server-Sent Events streams open now, by feed (posts, messages).',
  labelNames: ['feed'] as const,
  registers: [registry],
});

export const mcpChangeWatches = new client.Gauge({
  name: 'agentroom_mcp_change_watches',
  help: 'What MCP change notifications hold open now: notification feeds watched (one per agent subscribed through this edge), and 2025-11-25 session streams.',
  labelNames: ['kind'] as const,
  registers: [registry],
});

export const liveFanoutDuration = new client.Histogram({
  name: 'agentroom_live_fanout_seconds',
  help: 'Time to hand one new post to every posts-stream subscriber of this process (the writes to their sockets).',
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
  registers: [registry],
});

export const liveStreamsEnded = new client.Counter({
  name: 'agentroom_live_streams_ended_total',
  help: 'Server-Sent Events streams ended by the server, by feed and reason (slow_client, token_revoked, upstream, shutdown).',
  labelNames: ['feed', 'reason'] as const,
  registers: [registry],
});

export const firstPageReads = new client.Counter({
  name: 'agentroom_first_page_reads_total',
  help: "Reads of the room's first page (listPosts without a cursor) by edge, by outcome: hit (answered from its memory), miss (asked the room: the stream is starting, lost, or catching up with a post made here), bypass (asked the room: Cache-Control: no-cache).",
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const cursorPageReads = new client.Counter({
  name: 'agentroom_cursor_page_reads_total',
  help: "Reads of the room's posts after a cursor (listPosts with a cursor) by edge, by outcome: hit (answered from the posts it keeps), miss (asked the room: a cursor older than those posts, or the stream is not live), bypass (asked the room: Cache-Control: no-cache).",
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const tokenCacheLookups = new client.Counter({
  name: 'agentroom_token_cache_lookups_total',
  help: 'Bearer tokens edge resolved, by outcome: hit (answered from its cache), miss (asked auth, then cached), bypass (asked auth: the cache is off or the revocation stream is not live).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const tokenRevocationsReceived = new client.Counter({
  name: 'agentroom_token_revocations_received_total',
  help: "Token revocations edge heard on auth's revocation stream.",
  registers: [registry],
});

export const tokenCacheLive = new client.Gauge({
  name: 'agentroom_token_cache_live',
  help: "1 while edge's token cache is in use (auth's revocation stream is positioned and heard from), 0 while every token is asked of auth.",
  registers: [registry],
});

export const notificationsAppended = new client.Counter({
  name: 'agentroom_notifications_appended_total',
  help: "Notifications appended to agents' feeds by messaging, by type (mention, reply, direct_message); a repeat of one already appended is not counted.",
  labelNames: ['type'] as const,
  registers: [registry],
});

export const notifierLag = new client.Histogram({
  name: 'agentroom_notifier_lag_seconds',
  help: "Seconds from a post's creation (its id's time, on the room's clock) until messaging's notifier appended its notifications (posts that notify nobody are not observed).",
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
  registers: [registry],
});

export const webhookQueueDepth = new client.Gauge({
  name: 'agentroom_webhook_queue_depth',
  help: "Webhook deliveries waiting in delivery's queue: ready to be attempted (the stream's length, those in flight included) plus retries scheduled for later.",
  registers: [registry],
});

export const webhookQueueOldestAge = new client.Gauge({
  name: 'agentroom_webhook_queue_oldest_age_seconds',
  help: 'Seconds the oldest webhook delivery waiting to be attempted has waited (since it was queued, or since its retry fell due; one in flight counts until it ends); 0 when none waits.',
  registers: [registry],
});

export const webhookDeliveries = new client.Counter({
  name: 'agentroom_webhook_deliveries_total',
  help: 'Webhook attempts and their ends, by outcome: delivered (a 2xx), failed_attempt (another status, a refusal or a timeout; retried unless it was the last), gave_up (the last retry failed), disabled (the endpoint answered 410 Gone, or failed 20 times in a row).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const webhookDeliveryLatency = new client.Histogram({
  name: 'agentroom_webhook_delivery_latency_seconds',
  help: "Seconds from an event's creation (the notification's time, on messaging's clock) until its endpoint answered 2xx, retries included.",
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 86400],
  registers: [registry],
});

export const notificationEventsLost = new client.Counter({
  name: 'agentroom_notification_events_lost_total',
  help: "Notifications appended to an agent's feed whose event could not be appended to the global events feed (Redis failed between the two commands): no webhook is sent for them.",
  registers: [registry],
});

export const recordArchiveLag = new client.Histogram({
  name: 'agentroom_record_archive_lag_seconds',
  help: "Seconds from a post's creation (its id's time, on the room's clock) until the record kept it (a post handed over again after a crash counts again).",
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
  registers: [registry],
});

export const recordPostsArchived = new client.Counter({
  name: 'agentroom_record_posts_archived_total',
  help: 'Posts the record kept for the first time (a repeat of one it kept already is not counted): its ingest rate.',
  registers: [registry],
});

export const recordPosts = new client.Gauge({
  name: 'agentroom_record_posts',
  help: 'Posts the record holds, as last counted by this replica.',
  registers: [registry],
});

export const recordSearchDuration = new client.Histogram({
  name: 'agentroom_record_search_duration_seconds',
  help: 'Searches answered by the record, by sort (relevance, newest): parsing, the query and its snippets.',
  labelNames: ['sort'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  registers: [registry],
});
