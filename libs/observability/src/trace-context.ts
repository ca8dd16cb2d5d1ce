import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type TextMapGetter,
} from '@opentelemetry/api';

/**
 * The one way our code makes spans and carries trace context (gateway HTTP, gRPC both ways, events
 * through the outbox and NATS). Built on the OpenTelemetry API only; tracing.ts decides whether spans
 * are recorded and exported. While tracing is off every helper here is a flag check and a direct call.
 */

export { SpanKind, SpanStatusCode };
export type { Span, Context };

/** The parent of a span that starts a new trace (the gateway's, for a request from outside). */
export const NEW_TRACE: Context = ROOT_CONTEXT;

/** W3C trace-context headers (`traceparent`, maybe `tracestate`): what travels between processes. */
export type TraceHeaders = Record<string, string>;

const tracer = trace.getTracer('@sts/observability');
let tracingOn = false;

/** Called once by startTracing, after the provider is registered. */
export function markTracingOn(): void {
  tracingOn = true;
}

export function isTracingOn(): boolean {
  return tracingOn;
}

/** The active span's trace context as headers, or undefined when nothing is traced. */
export function currentTraceHeaders(): TraceHeaders | undefined {
  if (!tracingOn) return undefined;
  const headers: TraceHeaders = {};
  propagation.inject(context.active(), headers);
  return headers.traceparent ? headers : undefined;
}

/** The context that headers (HTTP, gRPC metadata, NATS, an outbox row) carry; the root without. */
export function contextFromHeaders<Carrier>(
  carrier: Carrier | undefined,
  getter?: TextMapGetter<Carrier>,
): Context {
  if (!tracingOn || carrier === undefined) return ROOT_CONTEXT;
  return getter
    ? propagation.extract(ROOT_CONTEXT, carrier, getter)
    : propagation.extract(ROOT_CONTEXT, carrier);
}

/** A link to the span that headers name (for a new trace that follows from another, or a batch). */
export function linkFromHeaders<Carrier>(
  carrier: Carrier | undefined,
  getter?: TextMapGetter<Carrier>,
): Link | undefined {
  if (!tracingOn) return undefined;
  const spanContext = trace.getSpanContext(contextFromHeaders(carrier, getter));
  return spanContext && trace.isSpanContextValid(spanContext) ? { context: spanContext } : undefined;
}

export interface SpanOptions {
  kind: SpanKind;
  /** The parent; the active context when absent. */
  parent?: Context;
  attributes?: Attributes;
  links?: Link[];
}

/** Starts a span that the caller ends; `run` executes with it active. Nothing is made while tracing is off. */
export function startSpan(name: string, options: SpanOptions): TracedScope {
  if (!tracingOn) return UNTRACED;
  const parent = options.parent ?? context.active();
  const span = tracer.startSpan(
    name,
    { kind: options.kind, attributes: options.attributes, links: options.links },
    parent,
  );
  return new RecordingScope(span, trace.setSpan(parent, span));
}

/** Runs `work` in a span that ends when it settles (an error ends it as failed). */
export async function inSpan<T>(name: string, options: SpanOptions, work: () => Promise<T>): Promise<T> {
  if (!tracingOn) return work();
  const scope = startSpan(name, options);
  try {
    return await scope.run(work);
  } catch (error) {
    scope.fail(error);
    throw error;
  } finally {
    scope.end();
  }
}

/** A started span (or nothing, while tracing is off) and how to work inside it. */
export interface TracedScope {
  /** Runs `work` with the span active (async continuations included). */
  run<T>(work: () => T): T;
  /** Runs an emitter's later listeners (a request body's `data`/`end`) with the span active. */
  bindEmitter(emitter: NodeJS.EventEmitter): void;
  setAttribute(key: string, value: string | number | boolean): void;
  /** Marks the span failed; `error` is recorded when it is an Error. */
  fail(error?: unknown, message?: string): void;
  end(): void;
  /** The trace id, for a log line or a response header; undefined while tracing is off. */
  readonly traceId: string | undefined;
}

const UNTRACED: TracedScope = {
  run: (work) => work(),
  bindEmitter: () => undefined,
  setAttribute: () => undefined,
  fail: () => undefined,
  end: () => undefined,
  traceId: undefined,
};

class RecordingScope implements TracedScope {
  constructor(
    private readonly span: Span,
    private readonly context: Context,
  ) {}

  get traceId(): string {
    return this.span.spanContext().traceId;
  }

  run<T>(work: () => T): T {
    return context.with(this.context, work);
  }

  bindEmitter(emitter: NodeJS.EventEmitter): void {
    context.bind(this.context, emitter);
  }

  setAttribute(key: string, value: string | number | boolean): void {
    this.span.setAttribute(key, value);
  }

  fail(error?: unknown, message?: string): void {
    if (error instanceof Error) this.span.recordException(error);
    this.span.setStatus({
      code: SpanStatusCode.ERROR,
      message: message ?? (error instanceof Error ? error.message : undefined),
    });
  }

  end(): void {
    this.span.end();
  }
}
