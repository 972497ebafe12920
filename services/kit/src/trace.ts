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

export { SpanKind };
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

/**
 * A link to the span whose context an item carried (`traceCarrier`), for the span of the work done
 * on it later: linked, not a child, as OpenTelemetry's messaging conventions have it. None when the
 * item carries no valid context.
 */
export function linkTo(carrier: TraceCarrier | undefined): Link[] {
  if (carrier?.traceparent === undefined) return [];
  const spanContext = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, carrier));
  return spanContext && isSpanContextValid(spanContext) ? [{ context: spanContext }] : [];
}

/** The context a caller's W3C fields name, for spans that must be its children (MCP's `_meta`). */
export function contextFrom(carrier: TraceCarrier): ReturnType<typeof context.active> {
  return propagation.extract(context.active(), carrier);
}

/** Runs `work` with `parent` as the current context. */
export function withContext<T>(parent: ReturnType<typeof context.active>, work: () => T): T {
  return context.with(parent, work);
}
