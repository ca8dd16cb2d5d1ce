import { context, propagation as propagationApi, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { Logger } from '@sts/logger/create-logger';
import { DEFAULT_TRACES_SAMPLER, type TracesSamplerName } from '@sts/config/env-fragments';
import { markTracingOn } from './trace-context';
import { samplerNamed, TraceRoots } from './trace-roots';
import { WorkerThreadSpanExporter } from './worker-thread-span-exporter';

/** What tracing needs from a process's configuration (observabilityEnv of @sts/config). */
export interface TracingConfig {
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string | undefined;
  OTEL_SERVICE_NAME?: string | undefined;
  /** DEFAULT_TRACES_SAMPLER when absent. */
  OTEL_TRACES_SAMPLER?: TracesSamplerName | undefined;
  OTEL_TRACES_SAMPLER_ARG?: number | undefined;
  OTEL_BSP_SCHEDULE_DELAY?: number | undefined;
  OTEL_BSP_EXPORT_TIMEOUT?: number | undefined;
  OTEL_BSP_MAX_QUEUE_SIZE?: number | undefined;
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE?: number | undefined;
}

/**
 * How the current span travels inside the process: `implicit` keeps it in AsyncLocalStorage (the
 * active context, which every async continuation inherits; the services), `explicit` keeps none and
 * the code passes `TracedScope.context` along (the gateway: with AsyncLocalStorage and the exporter on the main
 * thread it misses its ≤ 10 % at 10 % sampling, ×1.15 on Node 24; docs/benchmarks.md).
 */
export type ContextPropagation = 'implicit' | 'explicit';

export interface RunningTracing {
  /** Sends the spans still buffered and stops (last step of a shutdown). */
  stop(): Promise<void>;
}

let registered: TracerProvider | undefined;

/**
 * Turns tracing on for this process when an OTLP endpoint is configured (off by default: no
 * exporter, and the instrumentation costs a flag check per request). Spans go in batches over
 * OTLP/HTTP to `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`;
 * sampled as `OTEL_TRACES_SAMPLER` and its argument say; the SDK reads the other standard variables
 * itself (`OTEL_EXPORTER_OTLP_HEADERS` for a collector's credentials, `OTEL_BSP_*`). Context travels
 * in W3C `traceparent` headers: HTTP, gRPC metadata, NATS message headers, and the outbox rows in
 * between.
 *
 * One provider per process: when several services share a process (tests), the first one's name is
 * the resource's.
 */
export function startTracing(
  serviceName: string,
  config: TracingConfig,
  logger: Logger,
  propagation: ContextPropagation,
): RunningTracing {
  const url =
    config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
    (config.OTEL_EXPORTER_OTLP_ENDPOINT
      ? `${config.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`
      : undefined);
  if (!url || registered) return { stop: async () => undefined };
  const processor: SpanProcessor = new BatchSpanProcessor({
    exporter: new WorkerThreadSpanExporter(url),
    // Absent ones keep the SDK's defaults.
    scheduledDelayMillis: config.OTEL_BSP_SCHEDULE_DELAY,
    exportTimeoutMillis: config.OTEL_BSP_EXPORT_TIMEOUT,
    maxQueueSize: config.OTEL_BSP_MAX_QUEUE_SIZE,
    maxExportBatchSize: config.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
  });
  const roots = new TraceRoots(
    samplerNamed(config.OTEL_TRACES_SAMPLER ?? DEFAULT_TRACES_SAMPLER, config.OTEL_TRACES_SAMPLER_ARG),
  );
  const provider = new TracerProvider({
    sampler: roots.sampler,
    idGenerator: roots,
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: config.OTEL_SERVICE_NAME ?? serviceName,
      [ATTR_SERVICE_VERSION]: process.env.npm_package_version ?? '0.1.0',
    }),
    spanProcessors: [processor],
  });
  // The provider, the W3C trace-context propagator and, for `implicit`, an AsyncLocalStorage context manager:
  // the SDK registers none of them itself.
  trace.setGlobalTracerProvider(provider);
  propagationApi.setGlobalPropagator(new W3CTraceContextPropagator());
  if (propagation === 'implicit')
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  registered = provider;
  markTracingOn(roots);
  logger.info({ endpoint: url, propagation }, 'tracing on: spans exported over OTLP/HTTP');
  return {
    stop: async () => {
      try {
        await provider.shutdown();
      } catch (error) {
        logger.warn({ err: error }, 'the last spans could not be exported');
      }
    },
  };
}
