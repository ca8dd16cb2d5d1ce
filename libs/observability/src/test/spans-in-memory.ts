import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { markTracingOn } from '../trace-context';
import { samplerNamed, TraceRoots } from '../trace-roots';

/**
 * Turns tracing on for this process as a service's start does (sampler and ids from `roots`, W3C trace
 * context), with every finished span kept in memory for a spec to read. Global, as the SDK's registration
 * is: once on, it stays on for the rest of the file.
 */
export function recordSpansInMemory(
  roots = new TraceRoots(samplerNamed('parentbased_always_on')),
): InMemorySpanExporter {
  const exporter = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(
    new TracerProvider({
      sampler: roots.sampler,
      idGenerator: roots,
      spanProcessors: [new SimpleSpanProcessor({ exporter })],
    }),
  );
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  markTracingOn(roots);
  return exporter;
}
