import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { Worker, type TransferListItem } from 'node:worker_threads';

/**
 * The exporter's HTTP client, in a worker thread. An HTTP client on the main thread shares Node's stream
 * and socket code with the gateway's server, whose inline caches then serve two kinds of objects on
 * every request (docs/benchmarks.md). So the main thread only serializes a batch (OTLP/JSON, with the
 * SDK's JsonTraceSerializer) and hands the bytes over; the worker sends them with the SDK's OTLP/HTTP
 * delegate: its retries, timeout, compression, proxy and `OTEL_EXPORTER_OTLP_*` variables (the worker
 * sees the process's environment).
 */
export class WorkerThreadSpanExporter implements SpanExporter {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly waiting = new Map<number, (reply: WorkerReply) => void>();
  private shutDown = false;

  constructor(private readonly url: string) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    if (this.shutDown) {
      resultCallback({ code: ExportResultCode.FAILED, error: new Error('the span exporter is shut down') });
      return;
    }
    const bytes = JsonTraceSerializer.serializeRequest(spans);
    if (!bytes) {
      resultCallback({
        code: ExportResultCode.FAILED,
        error: new Error('the spans could not be serialized'),
      });
      return;
    }
    // A whole buffer moves to the worker without a copy.
    const { buffer } = bytes;
    const transfer =
      buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength
        ? [buffer]
        : [];
    this.ask({ type: 'export', bytes, spanCount: spans.length }, transfer, (reply) =>
      resultCallback(
        reply.error === undefined
          ? { code: ExportResultCode.SUCCESS }
          : { code: ExportResultCode.FAILED, error: new Error(reply.error) },
      ),
    );
  }

  forceFlush(): Promise<void> {
    if (!this.worker) return Promise.resolve();
    return new Promise((resolve) => this.ask({ type: 'flush' }, [], () => resolve()));
  }

  async shutdown(): Promise<void> {
    if (this.shutDown) return;
    this.shutDown = true;
    const worker = this.worker;
    if (!worker) return;
    // The delegate sends what it holds, then the thread ends.
    await new Promise<void>((resolve) => this.ask({ type: 'shutdown' }, [], () => resolve()));
    await worker.terminate();
  }

  private ask(request: WorkerRequest, transfer: TransferListItem[], onReply: (reply: WorkerReply) => void) {
    const id = this.nextId++;
    this.waiting.set(id, onReply);
    this.running().postMessage({ id, request }, transfer);
  }

  /** The worker, started on the first export and again after it died. */
  private running(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        url: this.url,
        // Resolved here, where the process's own module resolution applies (an eval'd worker would
        // resolve from the working directory).
        delegateModule: require.resolve('@opentelemetry/otlp-exporter-base/node-http'),
        serializerModule: require.resolve('@opentelemetry/otlp-transformer'),
      },
    });
    // The exporter never keeps a process alive by itself (the span processor's export timeout does
    // while a batch is out, a shutdown's last one included).
    worker.unref();
    worker.on('message', (reply: WorkerReply) => {
      const onReply = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      onReply?.(reply);
    });
    const failWaiting = (reason: string) => {
      if (this.worker === worker) this.worker = undefined;
      for (const [id, onReply] of this.waiting) onReply({ id, error: reason });
      this.waiting.clear();
    };
    worker.on('error', (error: Error) => failWaiting(`the span exporter's thread failed: ${error.message}`));
    worker.on('exit', (code) => failWaiting(`the span exporter's thread ended (exit code ${code})`));
    this.worker = worker;
    return worker;
  }
}

type WorkerRequest =
  { type: 'export'; bytes: Uint8Array; spanCount: number } | { type: 'flush' } | { type: 'shutdown' };

interface WorkerReply {
  id: number;
  /** Set when the request failed. */
  error?: string;
}

/**
 * The worker's code, evaluated as CommonJS (a string, so that no bundler rewrites its `require`).
 * Its serializer passes the main thread's bytes through and reads the collector's answer as
 * JsonTraceSerializer does (partial successes are logged by the delegate).
 */
const WORKER_SOURCE = `
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const { createOtlpHttpExportDelegate, convertLegacyHttpOptions } = require(workerData.delegateModule);
const { JsonTraceSerializer } = require(workerData.serializerModule);
const delegate = createOtlpHttpExportDelegate(
  convertLegacyHttpOptions({ url: workerData.url }, 'TRACES', 'v1/traces', { 'Content-Type': 'application/json' }),
  { serializeRequest: (request) => request.bytes, deserializeResponse: JsonTraceSerializer.deserializeResponse },
  'otlp_http_span_exporter',
  { name: 'span', countItems: (request) => request.spanCount },
  undefined,
);
const reply = (id, error) => parentPort.postMessage(error === undefined ? { id } : { id, error });
// An OTLPExporterError's message is the HTTP status text; its code is the status.
const messageOf = (error) =>
  error && error.message ? error.message + (error.code ? ' (HTTP ' + error.code + ')' : '') : String(error);
parentPort.on('message', ({ id, request }) => {
  if (request.type === 'export') {
    delegate.export(request, (result) =>
      reply(id, result.code === 0 ? undefined : messageOf(result.error || 'export failed')),
    );
  } else {
    const done = request.type === 'flush' ? delegate.forceFlush() : delegate.shutdown();
    done.then(() => reply(id), (error) => reply(id, messageOf(error)));
  }
});
`;
