// Spans of our own and the trace ids of logs and problems, through OpenTelemetry's API only: without
// the SDK (tracing off) every call here is a no-op that finds no span (docs/observability.md, Traces).
import {
  type Attributes,
  context,
  isSpanContextValid,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
} from '@opentelemetry/api';

export { SpanKind, SpanStatusCode };
export type { Attributes, Span };

/** The tracer of the product's own spans (the instrumentations have theirs). */
const tracer = trace.getTracer('agentroom');

/** `trace_id` and `span_id` of the span current in this async context, as log lines carry them. */
export function activeTraceIds(): { trace_id: string; span_id: string } | undefined {
  const spanContext = trace.getActiveSpan()?.spanContext();
  if (!spanContext || !isSpanContextValid(spanContext)) return undefined;
  return { trace_id: spanContext.traceId, span_id: spanContext.spanId };
}

/** The trace id of the current span when its trace is sampled (kept by the backend), for a problem document to name. */
export function recordedTraceId(): string | undefined {
  const spanContext = trace.getActiveSpan()?.spanContext();
  if (!spanContext || !isSpanContextValid(spanContext)) return undefined;
  return (spanContext.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED ? spanContext.traceId : undefined;
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  links?: Link[];
}

/**
 * Runs `work` inside a span of ours named `name`, current for everything it calls (the
 * instrumentations' spans become its children). A throw marks the span an error and is rethrown.
 */
export async function inSpan<T>(name: string, options: SpanOptions, work: (span: Span) => Promise<T>): Promise<T> {
  return tracer.startActiveSpan(name, options, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      if (error instanceof Error) span.recordException(error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** Adds attributes to the current span, if any (none when tracing is off). */
export function setSpanAttributes(attributes: Attributes): void {
  trace.getActiveSpan()?.setAttributes(attributes);
}

/** W3C trace-context fields (`traceparent`, `tracestate`) that an item carries across an asynchronous hop. */
export interface TraceCarrier {
  traceparent?: string;
  tracestate?: string;
}

/** The current span's context as W3C fields, to store with an item made now; empty when there is no span (tracing off). */
export function traceCarrier(): TraceCarrier {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return {
    ...(carrier.traceparent === undefined ? {} : { traceparent: carrier.traceparent }),
    ...(carrier.tracestate === undefined ? {} : { tracestate: carrier.tracestate }),
  };
}

/** `traceCarrier()`'s traceparent alone, as an optional field of an item: `{}` when there is no span. */
export function currentTraceparent(): { traceparent?: string } {
  const { traceparent } = traceCarrier();
  return traceparent === undefined ? {} : { traceparent };
}

/**
 * `inSpan` for the work done later on an item that carried `carrier` (a post its notifications, a
 * notification its webhook): the span is a child of the item's span, so a post's trace shows what
 * came of it, and links to it, as OpenTelemetry's messaging conventions have a consumer's span do
 * (docs/decisions.md §49). Without a valid carrier (tracing off then, or an item older than it), a
 * span of its own.
 */
export async function inLinkedSpan<T>(carrier: TraceCarrier | undefined, name: string, options: SpanOptions, work: (span: Span) => Promise<T>): Promise<T> {
  const links = linkTo(carrier);
  const producer = links[0];
  if (producer === undefined) return inSpan(name, options, work);
  return context.with(trace.setSpanContext(ROOT_CONTEXT, producer.context), () =>
    inSpan(name, { ...options, links: [...(options.links ?? []), ...links] }, work),
  );
}

/** `inLinkedSpan` for synchronous work (a fan-out to listeners): the same parent and link, or a span of its own. */
export function inLinkedSpanSync<T>(carrier: TraceCarrier | undefined, name: string, options: SpanOptions, work: (span: Span) => T): T {
  const links = linkTo(carrier);
  const producer = links[0];
  const run = (): T =>
    tracer.startActiveSpan(name, { ...options, links: [...(options.links ?? []), ...links] }, (span) => {
      try {
        return work(span);
      } finally {
        span.end();
      }
    });
  return producer === undefined ? run() : context.with(trace.setSpanContext(ROOT_CONTEXT, producer.context), run);
}

/**
 * A link to the span whose context an item carried (`traceCarrier`), for the span of the work done
 * on it later (which `inLinkedSpan` also makes that span's child). None when the item carries no
 * valid context.
 */
export function linkTo(carrier: TraceCarrier | undefined): Link[] {
  if (carrier?.traceparent === undefined) return [];
  const spanContext = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, carrier));
  return spanContext && isSpanContextValid(spanContext) ? [{ context: spanContext }] : [];
}

/** A message's own W3C fields (MCP's `params._meta`), when it carries a `traceparent` string; the propagator checks its format. */
export function carrierOf(meta: unknown): TraceCarrier | undefined {
  if (typeof meta !== 'object' || meta === null) return undefined;
  const { traceparent, tracestate } = meta as Record<string, unknown>;
  if (typeof traceparent !== 'string') return undefined;
  return { traceparent, ...(typeof tracestate === 'string' ? { tracestate } : {}) };
}

/**
 * `inSpan`, but the span's parent is the context a message carried (`carrier`) when it names a
 * valid one, with a link to the span current here (the HTTP request that brought the message);
 * otherwise the span is the current span's child, as `inSpan`'s.
 */
export async function inSpanUnder<T>(carrier: TraceCarrier | undefined, name: string, options: SpanOptions, work: (span: Span) => Promise<T>): Promise<T> {
  const parent = carrier === undefined ? undefined : propagation.extract(ROOT_CONTEXT, carrier);
  const parentSpan = parent === undefined ? undefined : trace.getSpanContext(parent);
  if (parent === undefined || parentSpan === undefined || !isSpanContextValid(parentSpan)) return inSpan(name, options, work);
  const here = trace.getActiveSpan()?.spanContext();
  const links = [...(options.links ?? []), ...(here && isSpanContextValid(here) ? [{ context: here }] : [])];
  return context.with(parent, () => inSpan(name, { ...options, links }, work));
}
