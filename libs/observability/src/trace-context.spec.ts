import { context } from '@opentelemetry/api';
import { SamplingDecision, type InMemorySpanExporter, type Sampler } from '@opentelemetry/sdk-trace';
import { capturedLogger } from '@sts/logger/captured-logger';
import {
  contextFromHeaders,
  currentTraceHeaders,
  inSpan,
  isTracingOn,
  linkToRecordedSpan,
  NEW_TRACE,
  SpanKind,
  startRootSpan,
  startSpan,
} from './trace-context';
import { recordSpansInMemory } from './test/spans-in-memory';
import { samplerNamed, TraceRoots } from './trace-roots';

describe('trace context', () => {
  it('does nothing while tracing is off: no headers, no spans, work runs as it is', async () => {
    expect(isTracingOn()).toBe(false);
    expect(currentTraceHeaders()).toBeUndefined();
    expect(startSpan('x', { kind: SpanKind.INTERNAL }).traceId).toBeUndefined();
    await expect(inSpan('x', { kind: SpanKind.INTERNAL }, async () => 42)).resolves.toBe(42);
  });

  describe('with tracing on', () => {
    let exporter: InMemorySpanExporter;
    const defaultSampler = samplerNamed('parentbased_always_on');
    // What the process's sampler is; a test may change it.
    let sampler: Sampler = defaultSampler;
    // Its decisions on new traces (asked without a name), by trace id.
    const newTraceDecisions = new Map<string, boolean>();
    const roots = new TraceRoots({
      shouldSample: (...args) => {
        const result = sampler.shouldSample(...args);
        if (args[2] === '') newTraceDecisions.set(args[1], result.decision !== SamplingDecision.NOT_RECORD);
        return result;
      },
    });
    beforeAll(() => {
      exporter = recordSpansInMemory(roots);
    });
    beforeEach(() => {
      exporter.reset();
      sampler = defaultSampler;
      newTraceDecisions.clear();
    });

    it('continues a trace from headers across awaits, and hands it on as headers', async () => {
      const parent = startSpan('request', { kind: SpanKind.SERVER });
      const headers = await parent.run(async () => {
        await new Promise((resolve) => setImmediate(resolve));
        return currentTraceHeaders();
      });
      parent.end();
      expect(headers?.traceparent).toMatch(new RegExp(`^00-${parent.traceId}-[0-9a-f]{16}-01$`));

      await inSpan('handle', { kind: SpanKind.CONSUMER, parent: contextFromHeaders(headers) }, async () => {
        await new Promise((resolve) => setTimeout(resolve, 1));
      });
      const [request, handle] = exporter.getFinishedSpans();
      expect(handle?.spanContext().traceId).toBe(request?.spanContext().traceId);
      expect(handle?.parentSpanContext?.spanId).toBe(request?.spanContext().spanId);
    });

    it('hands a context on by hand, without an active span (as the gateway does)', async () => {
      const request = startSpan('request', { kind: SpanKind.SERVER });
      expect(currentTraceHeaders()).toBeUndefined();
      const call = startSpan('call', { kind: SpanKind.CLIENT, parent: request.context });
      const headers = currentTraceHeaders(call.context);
      call.end();
      request.end();
      const [callSpan, requestSpan] = exporter.getFinishedSpans();
      expect(callSpan?.parentSpanContext?.spanId).toBe(requestSpan?.spanContext().spanId);
      expect(headers?.traceparent).toBe(`00-${request.traceId}-${callSpan?.spanContext().spanId}-01`);
      expect(request.logFields()).toEqual({
        trace_id: request.traceId,
        span_id: requestSpan?.spanContext().spanId,
      });
    });

    it("records a sampled span's attributes; an unsampled one hands its decision on", () => {
      const sampled = startSpan('GET /api/session', {
        kind: SpanKind.SERVER,
        attributes: { 'http.route': '/api/session', 'sts.request_id': 'req-1' },
      });
      sampled.end();
      expect(exporter.getFinishedSpans()[0]?.attributes).toEqual({
        'http.route': '/api/session',
        'sts.request_id': 'req-1',
      });
      const unsampled = startSpan('GET /api/session', {
        kind: SpanKind.SERVER,
        parent: contextFromHeaders({ traceparent: `00-${'c'.repeat(32)}-${'d'.repeat(16)}-00` }),
        attributes: { 'http.route': '/api/session' },
      });
      unsampled.end();
      expect(exporter.getFinishedSpans()).toHaveLength(1);
      expect(currentTraceHeaders(unsampled.context)?.traceparent).toMatch(
        new RegExp(`^00-${'c'.repeat(32)}-[0-9a-f]{16}-00$`),
      );
    });

    it('decides on a new trace before its span: one left out makes none, nor does what it causes', () => {
      sampler = samplerNamed('parentbased_traceidratio', 0.5);
      const ratio = samplerNamed('traceidratio', 0.5);
      const described: number[] = [];
      const describe = (index: number) => {
        described.push(index);
        return { name: `request ${index}`, attributes: { index } };
      };
      const requests = Array.from({ length: 200 }, (_, index) => {
        const scope = startRootSpan(SpanKind.SERVER, undefined, describe, index);
        const call = startSpan('call', { kind: SpanKind.CLIENT, parent: scope.context });
        const headers = currentTraceHeaders(call.context);
        call.end();
        scope.end();
        return { index, scope, headers };
      });
      const recorded = requests.filter(({ scope }) => scope.logFields() !== undefined);
      expect(recorded.length).toBeGreaterThan(60);
      expect(recorded.length).toBeLessThan(140);
      expect(described).toEqual(recorded.map(({ index }) => index));
      // Each request's trace id is the one decided on, and the decision the one the sampler makes on it.
      expect([...newTraceDecisions.keys()]).toEqual(requests.map(({ scope }) => scope.traceId));
      for (const { scope } of requests) {
        const decision = ratio.shouldSample(context.active(), scope.traceId!, '', SpanKind.SERVER, {}, []);
        const isRecorded = recorded.some((request) => request.scope === scope);
        expect(decision.decision === SamplingDecision.RECORD_AND_SAMPLED).toBe(isRecorded);
        expect(newTraceDecisions.get(scope.traceId!)).toBe(isRecorded);
      }
      // A decided id goes to the one span it was decided for.
      const later = startSpan('later', { kind: SpanKind.INTERNAL, parent: NEW_TRACE });
      later.end();
      expect(newTraceDecisions.has(later.traceId!)).toBe(false);
      const spans = exporter.getFinishedSpans().filter((span) => span.name !== 'later');
      expect(spans).toHaveLength(2 * recorded.length);
      for (const { index, scope, headers } of recorded) {
        const span = spans.find((candidate) => candidate.name === `request ${index}`);
        expect(span?.spanContext().traceId).toBe(scope.traceId);
        expect(span?.attributes).toEqual({ index });
        expect(headers?.traceparent).toMatch(new RegExp(`^00-${scope.traceId}-[0-9a-f]{16}-01$`));
      }
      // A left-out request's calls carry its trace id and the decision, so the services leave them out too.
      for (const { scope, headers } of requests.filter((request) => !recorded.includes(request))) {
        expect(headers?.traceparent).toMatch(new RegExp(`^00-${scope.traceId}-[0-9a-f]{16}-00$`));
        const handled = startSpan('handle', { kind: SpanKind.SERVER, parent: contextFromHeaders(headers) });
        handled.end();
        expect(handled.logFields()).toBeUndefined();
      }
      expect(exporter.getFinishedSpans().filter((span) => span.name !== 'later')).toHaveLength(
        2 * recorded.length,
      );
    });

    it('makes no span below one that sampling left out, even where the sampler would record it', () => {
      sampler = samplerNamed('always_on');
      const leftOut = contextFromHeaders({ traceparent: `00-${'e'.repeat(32)}-${'f'.repeat(16)}-00` });
      const handled = startSpan('handle', { kind: SpanKind.SERVER, parent: leftOut });
      handled.end();
      expect(exporter.getFinishedSpans()).toHaveLength(0);
      expect(handled.context).toBe(leftOut);
      expect(currentTraceHeaders(handled.context)?.traceparent).toBe(
        `00-${'e'.repeat(32)}-${'f'.repeat(16)}-00`,
      );
      // A sampled parent, or none, is the sampler's to decide.
      const root = startSpan('root', { kind: SpanKind.SERVER, parent: NEW_TRACE });
      root.end();
      expect(exporter.getFinishedSpans()).toHaveLength(1);
    });

    it("links a batch only to its messages' recorded spans", () => {
      const sampled = { traceparent: `00-${'1'.repeat(32)}-${'2'.repeat(16)}-01` };
      expect(linkToRecordedSpan(sampled)?.context).toMatchObject({
        traceId: '1'.repeat(32),
        spanId: '2'.repeat(16),
      });
      expect(
        linkToRecordedSpan({ traceparent: `00-${'1'.repeat(32)}-${'2'.repeat(16)}-00` }),
      ).toBeUndefined();
      expect(linkToRecordedSpan({})).toBeUndefined();
    });

    it('marks a span whose work failed', async () => {
      await expect(
        inSpan('fails', { kind: SpanKind.INTERNAL }, () => Promise.reject(new Error('boom'))),
      ).rejects.toThrow('boom');
      const [span] = exporter.getFinishedSpans();
      expect(span?.status).toMatchObject({ code: 2, message: 'boom' });
      expect(span?.events.map((event) => event.name)).toEqual(['exception']);
    });

    it("writes the active span's trace id into every log line, and none outside a span", async () => {
      const { logger, lines } = capturedLogger();
      const scope = startSpan('request', { kind: SpanKind.SERVER });
      await scope.run(async () => {
        await Promise.resolve();
        logger.info('inside');
      });
      scope.end();
      logger.info('outside');
      expect(lines[0]).toMatchObject({ msg: 'inside', trace_id: scope.traceId });
      expect(lines[0]?.span_id).toMatch(/^[0-9a-f]{16}$/);
      expect(lines[1]).not.toHaveProperty('trace_id');
    });

    it('names no trace that sampling left out, in log lines or log fields', async () => {
      const { logger, lines } = capturedLogger();
      const unsampled = contextFromHeaders({ traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-00` });
      const scope = startSpan('handle', { kind: SpanKind.CONSUMER, parent: unsampled });
      scope.run(() => logger.info('inside'));
      scope.end();
      expect(scope.traceId).toBe('a'.repeat(32));
      expect(scope.logFields()).toBeUndefined();
      expect(lines[0]).not.toHaveProperty('trace_id');
    });
  });
});
