import { status, type Metadata, type ServiceError, type sendUnaryData } from '@grpc/grpc-js';
import type { TextMapGetter } from '@opentelemetry/api';
import {
  grpcClientHandled,
  grpcClientHandlingSeconds,
  grpcServerHandled,
  grpcServerHandlingSeconds,
} from '@sts/observability/metrics';
import {
  contextFromHeaders,
  currentTraceHeaders,
  SpanKind,
  startSpan,
  type Context,
} from '@sts/observability/trace-context';

/**
 * Metrics and spans of every unary gRPC call, on both sides (grpc-server.ts and grpc-client.ts).
 * Trace context travels as the `traceparent`/`tracestate` metadata keys.
 */

const metadataGetter: TextMapGetter<Metadata> = {
  get: (metadata, key) => {
    const value = metadata.get(key)[0];
    return value === undefined ? undefined : String(value);
  },
  keys: (metadata) => Object.keys(metadata.getMap()),
};

/** Codes that mean the server failed, not that the request was refused (OpenTelemetry's rule for servers). */
const SERVER_FAULTS = new Set<number>([
  status.UNKNOWN,
  status.DEADLINE_EXCEEDED,
  status.UNIMPLEMENTED,
  status.INTERNAL,
  status.UNAVAILABLE,
  status.DATA_LOSS,
]);

const codeName = (code: number): string => status[code] ?? String(code);

/**
 * Wraps one method of a server: the call runs in a span continuing the caller's trace, and its
 * status and duration are counted. Label children are made once per method, not per call.
 */
export function observeServerMethod<Call extends { metadata: Metadata }>(
  service: string,
  method: string,
  run: (call: Call, callback: sendUnaryData<Buffer>) => void,
): (call: Call, callback: sendUnaryData<Buffer>) => void {
  const duration = grpcServerHandlingSeconds.labels(service, method);
  const handled = new Map<number, ReturnType<typeof grpcServerHandled.labels>>();
  const countOf = (code: number) => {
    let counter = handled.get(code);
    if (!counter) {
      counter = grpcServerHandled.labels(service, method, codeName(code));
      handled.set(code, counter);
    }
    return counter;
  };
  const spanName = `${service}/${method}`;
  return (call, callback) => {
    const stopTimer = duration.startTimer();
    const span = startSpan(spanName, {
      kind: SpanKind.SERVER,
      parent: contextFromHeaders(call.metadata, metadataGetter),
      attributes: { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': method },
    });
    span.run(() =>
      run(call, (error, value) => {
        const code = error ? (error.code ?? status.UNKNOWN) : status.OK;
        stopTimer();
        countOf(code).inc();
        span.setAttribute('rpc.grpc.status_code', code);
        if (SERVER_FAULTS.has(code)) span.fail(undefined, codeName(code));
        span.end();
        callback(error, value);
      }),
    );
  };
}

/**
 * The client side of a method's calls: each call gets a span (a child of `parent`, or of the active
 * context) whose context the metadata carries, and its status and duration are counted. Label
 * children are made once per method, not per call.
 */
export function observeClientMethod(
  method: string,
): (metadata: Metadata, parent: Context | undefined) => (error: ServiceError | null) => void {
  const duration = grpcClientHandlingSeconds.labels(method);
  const handled = new Map<number, ReturnType<typeof grpcClientHandled.labels>>();
  const countOf = (code: number) => {
    let counter = handled.get(code);
    if (!counter) {
      counter = grpcClientHandled.labels(method, codeName(code));
      handled.set(code, counter);
    }
    return counter;
  };
  return (metadata, parent) => {
    const stopTimer = duration.startTimer();
    const span = startSpan(method, {
      kind: SpanKind.CLIENT,
      parent,
      attributes: { 'rpc.system': 'grpc', 'rpc.method': method },
    });
    const trace = currentTraceHeaders(span.context);
    if (trace) for (const [key, value] of Object.entries(trace)) metadata.set(key, value);
    return (error) => {
      const code = error ? (error.code ?? status.UNKNOWN) : status.OK;
      stopTimer();
      countOf(code).inc();
      span.setAttribute('rpc.grpc.status_code', code);
      if (code !== status.OK) span.fail(undefined, codeName(code));
      span.end();
    };
  };
}
