import { ROOT_CONTEXT, type Link, type SpanKind } from '@opentelemetry/api';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  RandomIdGenerator,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type IdGenerator,
  type Sampler,
} from '@opentelemetry/sdk-trace';
import type { TracesSamplerName } from '@sts/config/env-fragments';
import type { RootDecisions } from './trace-context';

/**
 * The sampler `OTEL_TRACES_SAMPLER` names; `ratio` is `OTEL_TRACES_SAMPLER_ARG` (1 when absent, as
 * OpenTelemetry specifies).
 */
export function samplerNamed(name: TracesSamplerName, ratio = 1): Sampler {
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

/**
 * A process's trace ids and its sampler's decision on a new trace, shared by its tracer provider (as
 * its id generator and sampler) and by `startRootSpan` (trace-context.ts), which asks before it makes a
 * span: a trace that sampling leaves out then costs no span at all. The id decided on is the one the
 * next span without a parent gets, and the provider's sampler decides again on it, the same way: every
 * sampler above decides on the trace id alone.
 */
export class TraceRoots implements IdGenerator, RootDecisions {
  private readonly random = new RandomIdGenerator();
  private decidedTraceId: string | undefined;

  constructor(readonly sampler: Sampler) {}

  generateTraceId(): string {
    const traceId = this.decidedTraceId ?? this.random.generateTraceId();
    this.decidedTraceId = undefined;
    return traceId;
  }

  generateSpanId(): string {
    return this.random.generateSpanId();
  }

  /** A new trace's id, not yet decided on. */
  newTraceId(): string {
    return this.random.generateTraceId();
  }

  recordsNewTrace(traceId: string, kind: SpanKind, links: Link[] | undefined): boolean {
    return (
      this.sampler.shouldSample(ROOT_CONTEXT, traceId, '', kind, {}, links ?? []).decision !==
      SamplingDecision.NOT_RECORD
    );
  }

  giveNextTraceId(traceId: string): void {
    this.decidedTraceId = traceId;
  }
}
