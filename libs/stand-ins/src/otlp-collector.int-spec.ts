import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { context, trace } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { WorkerThreadSpanExporter } from '@sts/observability/worker-thread-span-exporter';
import { startOtlpCollector, type OtlpCollector } from './otlp-collector';

describe('our span exporter (a worker thread) and the collector stand-in', () => {
  let collector: OtlpCollector;
  beforeAll(async () => {
    collector = await startOtlpCollector();
  });
  afterAll(() => collector.close());

  function providerExportingTo(exporter: WorkerThreadSpanExporter, scheduledDelayMillis: number) {
    return new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': 'exporter-spec' }),
      spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis })],
    });
  }

  it('delivers a batch as OTLP/JSON with its resource, parents and attributes', async () => {
    const provider = providerExportingTo(new WorkerThreadSpanExporter(`${collector.url}/v1/traces`), 10);
    const tracer = provider.getTracer('spec');
    const parent = tracer.startSpan('parent');
    const child = tracer.startSpan(
      'child',
      { attributes: { 'sts.answer': 42 } },
      trace.setSpan(context.active(), parent),
    );
    child.end();
    parent.end();
    await provider.forceFlush();

    const parentId = parent.spanContext().spanId;
    const received = collector.spans.filter((span) => span.traceId === parent.spanContext().traceId);
    expect(received).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ service: 'exporter-spec', name: 'parent', spanId: parentId }),
        expect.objectContaining({ name: 'child', parentSpanId: parentId, attributes: { 'sts.answer': 42 } }),
      ]),
    );
    await provider.shutdown();
  });

  it('sends what is still buffered when it shuts down, then refuses more', async () => {
    const exporter = new WorkerThreadSpanExporter(`${collector.url}/v1/traces`);
    const provider = providerExportingTo(exporter, 60_000);
    const span = provider.getTracer('spec').startSpan('last words');
    span.end();
    await provider.shutdown();

    expect(collector.spans.map((received) => received.spanId)).toContain(span.spanContext().spanId);
    await expect(exportOnce(exporter, [])).resolves.toMatchObject({ code: ExportResultCode.FAILED });
  });

  it('keeps a process whose last step is the shutdown alive until the last batch is sent', async () => {
    // A process with nothing else left to do: the worker thread alone must hold it open.
    const script = `
      const { TracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace');
      const { WorkerThreadSpanExporter } = require('@sts/observability/worker-thread-span-exporter');
      const exporter = new WorkerThreadSpanExporter(process.env.COLLECTOR_URL + '/v1/traces');
      const provider = new TracerProvider({
        spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: 60000 })],
      });
      const span = provider.getTracer('child').startSpan('from a process that ends');
      span.end();
      console.log(span.spanContext().spanId);
      void provider.shutdown();
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--eval', script], {
      cwd: resolve(__dirname, '../../..'),
      env: { ...process.env, COLLECTOR_URL: collector.url },
    });
    expect(collector.spans.map((received) => received.spanId)).toContain(stdout.trim());
  });

  it("reports the collector's refusal as a failed export, and keeps working afterwards", async () => {
    let refuse = true;
    const server = createServer((request, response) => {
      request.resume();
      request.on('end', () =>
        refuse
          ? response.writeHead(400, { 'content-type': 'text/plain' }).end('no')
          : response.writeHead(200, { 'content-type': 'application/json' }).end('{}'),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const exporter = new WorkerThreadSpanExporter(`http://127.0.0.1:${port}/v1/traces`);
    const span = providerExportingTo(exporter, 60_000).getTracer('spec').startSpan('refused');
    span.end();
    try {
      const refused = await exportOnce(exporter, [span as unknown as ReadableSpan]);
      expect(refused.code).toBe(ExportResultCode.FAILED);
      expect(refused.error?.message).toBe('Bad Request (HTTP 400)');

      refuse = false;
      await expect(exportOnce(exporter, [span as unknown as ReadableSpan])).resolves.toEqual({
        code: ExportResultCode.SUCCESS,
      });
    } finally {
      await exporter.shutdown();
      server.close();
    }
  });
});

function exportOnce(exporter: WorkerThreadSpanExporter, spans: ReadableSpan[]): Promise<ExportResult> {
  return new Promise((resolve) => exporter.export(spans, resolve));
}
