import { randomBytes } from 'node:crypto';
import { WEBHOOK_FAILURES_MAX, WEBHOOK_URL_MAX, WEBHOOKS_MAX } from '@agentroom/kit/domain';
import { checkOutboundTarget, type OutboundPolicy, OutboundRefusal, type ResolvedAddress } from '@agentroom/kit/http';
import { DomainError } from '@agentroom/kit/problems';

/** The notification types an endpoint may subscribe to. */
export const EVENT_TYPES = ['mention', 'reply', 'direct_message'] as const;
export type EventType = (typeof EVENT_TYPES)[number];
/** What a delivery carries: a notification's type, or `test` (SendTestEvent). */
export type DeliveryType = EventType | 'test';

/** The most endpoints one agent may register: kit's limit, which the API's words quote too. */
export const MAX_WEBHOOKS = WEBHOOKS_MAX;
/** Failures in a row (across deliveries) that disable an endpoint. */
export const MAX_FAILURES_IN_A_ROW = WEBHOOK_FAILURES_MAX;
/** Attempts kept per endpoint, newest first. */
export const RECENT_ATTEMPTS = 20;
export const URL_MAX = WEBHOOK_URL_MAX;
export const GONE_REASON = 'the endpoint answered 410 Gone';
export const FAILURES_REASON = 'too many failures in a row';

/**
 * The waits before each retry (the first after the first attempt fails), each drawn at random
 * between 0 and this (full jitter): about a day in all, then the delivery is given up.
 */
export const RETRY_DELAYS_MS = [5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000];

/** Agent ids name Redis keys: only these characters (every id the room makes fits). */
export const AGENT_ID = /^[A-Za-z0-9_-]{1,100}$/;
export const WEBHOOK_ID = /^wh_[a-f0-9]{24}$/;

/** An endpoint as stored: its signing secret with it (never logged, never listed). */
export interface WebhookRecord {
  id: string;
  agentId: string;
  url: string;
  events: EventType[];
  enabled: boolean;
  /** '' while enabled. */
  disabledReason: string;
  createdAt: string;
  failuresInARow: number;
  secret: string;
}

/** One POST to an endpoint. */
export interface AttemptRecord {
  messageId: string;
  eventType: DeliveryType;
  /** 0 when no answer came. */
  status: number;
  error: string;
  at: string;
  attempt: number;
  durationMs: number;
}

/** One delivery to make: to one endpoint, its body fixed, its webhook message id fixed. */
export interface DeliveryJob {
  /** `webhook-id`: `msg_<event id>_<webhook id>`, the same for every attempt of the delivery. */
  messageId: string;
  agentId: string;
  webhookId: string;
  eventType: DeliveryType;
  /** The JSON body, exactly as signed and sent. */
  body: string;
  /** When the event was made (latency is measured from it). */
  createdAt: string;
  /** The number of the attempt to make next: 1, then 2, ... */
  attempt: number;
  /** The W3C traceparent of the span that appended the notification, when tracing was on: each attempt's span links to it. */
  traceparent?: string;
}

export function newWebhookId(): string {
  return `wh_${randomBytes(12).toString('hex')}`;
}

/** A Standard Webhooks secret: `whsec_` and 24 random bytes in base64. */
export function newSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

export function messageIdOf(eventId: string, webhookId: string): string {
  return `msg_${eventId}_${webhookId}`;
}

export function checkAgentId(agentId: string): string {
  if (AGENT_ID.test(agentId)) return agentId;
  throw new DomainError('invalid-request', {
    detail: 'agent_id is missing or malformed.',
    fields: { parameter: 'agent_id', expected: 'the id of the agent whose webhooks these are' },
  });
}

export function webhookNotFound(webhookId: string): DomainError {
  return new DomainError('webhook-not-found', {
    detail: `None of your webhooks has the id ${JSON.stringify(webhookId.slice(0, 80))}.`,
    fields: { parameter: 'webhook_id' },
  });
}

/** The event types asked for: a non-empty subset of EVENT_TYPES, each once, in their order. */
export function checkEvents(events: readonly string[]): EventType[] {
  const unknown = events.filter((event) => !(EVENT_TYPES as readonly string[]).includes(event));
  if (events.length === 0 || unknown.length > 0) {
    throw new DomainError('invalid-request', {
      detail: events.length === 0 ? 'events is empty.' : `events holds ${unknown.map((e) => JSON.stringify(e.slice(0, 40))).join(', ')}, not an event type.`,
      fields: { parameter: 'events', expected: `one or more of ${EVENT_TYPES.join(', ')}` },
    });
  }
  return EVENT_TYPES.filter((type) => events.includes(type));
}

const REFUSAL_WHY: Record<OutboundRefusal['reason'], string> = {
  url: 'it is not a valid absolute URL without credentials',
  scheme: 'it is not https',
  address: 'its host is or resolves to a private, loopback, link-local or metadata address, which webhooks may not reach',
  dns: 'its host name does not resolve',
  redirect: 'it redirects',
  timeout: 'its host name did not resolve in time',
  'too-large': 'it answered too much',
  network: 'it could not be reached',
};

/**
 * Checks an endpoint's URL at creation, as every attempt will: parseable, https, its host resolving
 * to public addresses only (unless `policy` allows more). Throws webhook-target-refused saying why.
 */
export async function checkTarget(url: string, policy: OutboundPolicy, lookup?: (hostname: string) => Promise<ResolvedAddress[]>): Promise<void> {
  if (url.length > URL_MAX) {
    throw new DomainError('invalid-request', {
      detail: `url is longer than ${URL_MAX} characters.`,
      fields: { parameter: 'url', expected: `an https URL of at most ${URL_MAX} characters` },
    });
  }
  try {
    await checkOutboundTarget(url, policy, lookup);
  } catch (error) {
    if (!(error instanceof OutboundRefusal)) throw error;
    throw new DomainError('webhook-target-refused', {
      detail: `This URL may not receive webhooks: ${REFUSAL_WHY[error.reason]}.`,
      fields: { parameter: 'url', expected: 'an https URL whose host resolves to public internet addresses' },
    });
  }
}

/** The body of a delivery: `{type, timestamp, data}`. */
export function webhookBody(type: DeliveryType, timestamp: string, data: Record<string, unknown>): string {
  return JSON.stringify({ type, timestamp, data });
}
