import { logFieldsOf, type TraceLogFields } from '@sts/logger/create-logger';
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
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
export type { Attributes, Context, Span };

/** The parent of a span that starts a new trace (the gateway's, for a request from outside). */
export const NEW_TRACE: Context = ROOT_CONTEXT;

/** W3C trace-context headers (`traceparent`, maybe `tracestate`): what travels between processes. */
export type TraceHeaders = Record<string, string>;

const tracer = trace.getTracer('@sts/observability');
let tracingOn = false;
let roots: RootDecisions;

/**
 * The process's trace ids and its sampler's decision on a new trace, from the SDK's side (TraceRoots
 * of trace-roots.ts), for `startRootSpan`.
 */
export interface RootDecisions {
  newTraceId(): string;
  generateSpanId(): string;
  /** Whether the sampler records the new trace `traceId`. */
  recordsNewTrace(traceId: string, kind: SpanKind, links: Link[] | undefined): boolean;
  /** The next span made without a parent gets `traceId` (called just before making it). */
  giveNextTraceId(traceId: string): void;
}

/** Called once by startTracing, after the provider is registered with the same decisions. */
export function markTracingOn(decisions: RootDecisions): void {
  roots = decisions;
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

/** A link to the span that headers name (for a new trace that follows from another one). */
export function linkFromHeaders<Carrier>(
  carrier: Carrier | undefined,
  getter?: TextMapGetter<Carrier>,
): Link | undefined {
  if (!tracingOn) return undefined;
  const spanContext = trace.getSpanContext(contextFromHeaders(carrier, getter));
  return spanContext && trace.isSpanContextValid(spanContext) ? { context: spanContext } : undefined;
}

/** A link to the span that headers name when that span is recorded (a batch's link to each message's span). */
export function linkToRecordedSpan<Carrier>(
  carrier: Carrier | undefined,
  getter?: TextMapGetter<Carrier>,
): Link | undefined {
  const link = linkFromHeaders(carrier, getter);
  return link && link.context.traceFlags & TraceFlags.SAMPLED ? link : undefined;
}

export interface SpanOptions {
  kind: SpanKind;
  /** The parent; the active context when absent. */
  parent?: Context;
  attributes?: Attributes;
  links?: Link[];
}

/**
 * Starts a span that the caller ends; `run` executes with it active. Nothing is made while tracing is
 * off, nor below a span that sampling left out, whatever the sampler: the decision made where a trace
 * starts holds for the rest of it (as the `parentbased_*` samplers have it; `always_on` or
 * `traceidratio` in a service would record pieces of traces without their root).
 */
export function startSpan(name: string, options: SpanOptions): TracedScope {
  if (!tracingOn) return UNTRACED;
  const parent = options.parent ?? context.active();
  const parentSpan = trace.getSpanContext(parent);
  if (parentSpan && !(parentSpan.traceFlags & TraceFlags.SAMPLED) && trace.isSpanContextValid(parentSpan))
    return new LeftOutScope(parentSpan.traceId, parent);
  const span = tracer.startSpan(name, { kind: options.kind, links: options.links }, parent);
  // The samplers OTEL_TRACES_SAMPLER chooses decide without attributes, so a span that sampling
  // leaves out (most of them) is not given any.
  if (options.attributes && span.isRecording()) span.setAttributes(options.attributes);
  return new RecordingScope(span, parent);
}

/**
 * Starts the span of a new trace (a gateway request from outside). The sampler decides first, on the
 * id the trace would get, so a trace it leaves out (most of them) makes no span: only the trace
 * context that its gRPC calls and messages carry on, made when first asked for, so that they are
 * left out too. `describe` names a recorded span and gives its attributes; it runs for no other.
 */
export function startRootSpan<Subject>(
  kind: SpanKind,
  links: Link[] | undefined,
  describe: (subject: Subject) => { name: string; attributes: Attributes },
  subject: Subject,
): TracedScope {
  if (!tracingOn) return UNTRACED;
  const traceId = roots.newTraceId();
  if (!roots.recordsNewTrace(traceId, kind, links)) return new LeftOutScope(traceId, undefined);
  const { name, attributes } = describe(subject);
  roots.giveNextTraceId(traceId);
  const span = tracer.startSpan(name, { kind, links }, NEW_TRACE);
  // Not an option of startSpan, which copies them twice more (docs/benchmarks.md).
  span.setAttributes(attributes);
  return new RecordingScope(span, NEW_TRACE);
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

/**
 * A trace that sampling left out: no span, only the context that carries its id and its decision to
 * what the work causes (the parent's own, or for a new trace one made when first asked for).
 */
class LeftOutScope implements TracedScope {
  constructor(
    readonly traceId: string,
    private madeContext: Context | undefined,
  ) {}

  get context(): Context {
    return (this.madeContext ??= trace.setSpanContext(NEW_TRACE, {
      traceId: this.traceId,
      spanId: roots.generateSpanId(),
      traceFlags: TraceFlags.NONE,
    }));
  }

  run<T>(work: () => T): T {
    return context.with(this.context, work);
  }

  logFields(): undefined {
    return undefined;
  }

  setAttribute(): void {}

  fail(): void {}

  end(): void {}
}

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
