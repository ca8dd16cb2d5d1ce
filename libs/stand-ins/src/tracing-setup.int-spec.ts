import { context, propagation, trace } from '@opentelemetry/api';
import { capturedLogger } from '@sts/logger/captured-logger';
import { startTracing, type RunningTracing } from '@sts/observability/tracing';
import { eventually } from '@sts/testing/eventually';
import { startOtlpCollector, type OtlpCollector } from './otlp-collector';

/**
 * A service's tracing as startTracing sets it up (one per process, so one per file): the batching
 * variables it passes to the span processor, the W3C propagator and, for implicit propagation, the
 * context manager that the SDK no longer registers by itself.
 */
describe('startTracing against the collector stand-in', () => {
  let collector: OtlpCollector;
  let tracing: RunningTracing;
  const { logger } = capturedLogger('tracing-setup');

  beforeAll(async () => {
    collector = await startOtlpCollector();
    tracing = startTracing(
      'tracing-setup',
      { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: 50 },
      logger,
      'implicit',
    );
  });
  afterAll(async () => {
    await tracing.stop();
    await collector.close();
  });

  it('exports a batch after OTEL_BSP_SCHEDULE_DELAY, not the SDK default of 5 s', async () => {
    const ended = Date.now();
    trace.getTracer('spec').startSpan('scheduled').end();
    await eventually(() => collector.spans.some((span) => span.name === 'scheduled'), 2_000);
    expect(Date.now() - ended).toBeLessThan(2_000);
    expect(collector.spans.find((span) => span.name === 'scheduled')?.service).toBe('tracing-setup');
  });

  it('keeps the active span across awaits and writes it into W3C traceparent headers', async () => {
    const span = trace.getTracer('spec').startSpan('parent');
    const headers: Record<string, string> = {};
    await context.with(trace.setSpan(context.active(), span), async () => {
      await new Promise((resolve) => setImmediate(resolve));
      propagation.inject(context.active(), headers);
    });
    span.end();
    expect(headers['traceparent']).toBe(`00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`);
  });
});
