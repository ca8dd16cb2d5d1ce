import { logFieldsOf, type TraceLogFields } from '@sts/logger/create-logger';
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
 *
 * Inside a process the context travels one of two ways (tracing.ts's `ContextPropagation`): the
 * services keep it in AsyncLocalStorage (the active context), the gateway passes `TracedScope.context`
 * by hand with each request's gRPC calls and publications.
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

/**
 * A trace context as headers (`from`, or the active context when absent), or undefined when nothing
 * is traced.
 */
export function currentTraceHeaders(from?: Context): TraceHeaders | undefined {
  if (!tracingOn) return undefined;
  const headers: TraceHeaders = {};
  propagation.inject(from ?? context.active(), headers);
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
  const span = tracer.startSpan(name, { kind: options.kind, links: options.links }, parent);
  // The samplers OTEL_TRACES_SAMPLER chooses decide without attributes, so a span that sampling
  // leaves out (most of them) is not given any.
  if (options.attributes && span.isRecording()) span.setAttributes(options.attributes);
  return new RecordingScope(span, parent);
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
  /** The context holding the span, for a process that passes it by hand; undefined while tracing is off. */
  readonly context: Context | undefined;
  setAttribute(key: string, value: string | number | boolean): void;
  /** Marks the span failed; `error` is recorded when it is an Error. */
  fail(error?: unknown, message?: string): void;
  end(): void;
  /** The trace id, for a log line or a response header; undefined while tracing is off. */
  readonly traceId: string | undefined;
  /** The fields that name the span in a log line (`logFieldsOf` of @sts/logger), when it is sampled. */
  logFields(): TraceLogFields | undefined;
}

const UNTRACED: TracedScope = {
  run: (work) => work(),
  context: undefined,
  setAttribute: () => undefined,
  fail: () => undefined,
  end: () => undefined,
  traceId: undefined,
  logFields: () => undefined,
};

class RecordingScope implements TracedScope {
  private spanContext: Context | undefined;

  constructor(
    private readonly span: Span,
    private readonly parent: Context,
  ) {}

  /** Made on first use: a request answered from the gateway's caches never needs it. */
  get context(): Context {
    return (this.spanContext ??= trace.setSpan(this.parent, this.span));
  }

  get traceId(): string {
    return this.span.spanContext().traceId;
  }

  run<T>(work: () => T): T {
    return context.with(this.context, work);
  }

  logFields(): TraceLogFields | undefined {
    return logFieldsOf(this.span);
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
