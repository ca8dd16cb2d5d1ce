import { Client, Metadata, status, type ServiceDefinition, type ServiceError } from '@grpc/grpc-js';
import { grpcErrorToAppError } from './error-metadata';
import { observeClientMethod } from './grpc-observability';
import { grpcChannelCredentials, type GrpcTls } from './grpc-tls';
import type { CallOptions, PromiseClient } from './service-types';
import type { ServiceName } from '@sts/vocabulary/services';
import { SERVICE_TOKEN_METADATA_KEY, type ServiceTokenIssuer } from './service-token';

const RECEIVE_WINDOW_BYTES = 16 * 1024 * 1024;

/**
 * A promise-returning client over one long-lived channel. Every call has a deadline (there is no
 * call without one), carries the request id, and turns failures into AppError.
 *
 * grpc-js hands the response to us as bytes and we decode them after the call ends. Why: grpc-js's
 * callback closure (and through it whatever it can reach) stays reachable to V8's young-generation
 * collector for a while after the call ends, though not to a full collection. When that closure
 * held the decoded message, or our promise, every response of a device page (~50 KB of objects)
 * survived its first scavenge and was then promoted: 20–25 MB copied per scavenge and 15–20 ms
 * pauses at 500 pages/s, the whole tail of the page's latency. With only bytes reachable from
 * grpc-js and the settle functions dropped on completion, ~4 MB survive and pauses are ~5 ms
 * (docs/benchmarks.md, "What the GC does to the tail").
 */
export function createPromiseClient<Definition extends ServiceDefinition>(
  definition: Definition,
  address: string,
  defaultDeadlineMs: number,
  /** Every call presents a service token of `issuer` meant for `target` (service-token.ts). */
  auth: { issuer: ServiceTokenIssuer; target: ServiceName },
  /** Mutual TLS with the server (grpc-tls.ts); plaintext without. */
  tls: GrpcTls | null = null,
): PromiseClient<Definition> & { close(): void } {
  const channel = new Client(address, grpcChannelCredentials(tls), {
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    // All calls share one HTTP/2 connection. With the default 64 KiB receive window, a few
    // concurrent page-sized responses fill it and the rest wait a round trip for WINDOW_UPDATE
    // (measured: 1,491 vs 1,837 device pages/s at 64 in flight; docs/benchmarks.md).
    'grpc-node.flow_control_window': RECEIVE_WINDOW_BYTES,
  });
  const methods: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(definition)) {
    if (method.requestStream || method.responseStream) throw new Error(`gRPC method ${name} is not unary`);
    const observeCall = observeClientMethod(method.path.slice(1));
    methods[name] = (request: unknown, options: CallOptions = {}) =>
      new Promise((resolve, reject) => {
        const deadline = new Date(Date.now() + (options.deadlineMs ?? defaultDeadlineMs));
        const start = (token: string) => {
          const metadata = new Metadata();
          metadata.set(SERVICE_TOKEN_METADATA_KEY, token);
          if (options.requestId) metadata.set('x-request-id', options.requestId);
          const observed = observeCall(metadata, options.traceContext);
          withoutStackTraces(() =>
            channel.makeUnaryRequest(
              method.path,
              method.requestSerialize,
              keepBytes,
              request,
              metadata,
              { deadline },
              settleOnce({ resolve, reject }, method.responseDeserialize, observed),
            ),
          );
        };
        const token = auth.issuer.tokenFor(auth.target);
        if (typeof token === 'string') start(token);
        else token.then(start, reject);
      });
  }
  methods.close = () => channel.close();
  return methods as PromiseClient<Definition> & { close(): void };
}

/** grpc-js's per-call Error would keep the caller's request alive through its stack; the device page misses its target with it (bench/enrollment.bench.ts). */
function withoutStackTraces(start: () => void): void {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    start();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

function keepBytes(bytes: Buffer): Buffer {
  return bytes;
}

interface Pending {
  resolve?: (response: unknown) => void;
  reject?: (error: unknown) => void;
}

/**
 * The completion callback given to grpc-js. Defined outside the promise executor so that it reaches
 * only `pending` (cleared on the first call) and the decoder, never the promise or the response.
 */
function settleOnce(
  pending: Pending,
  decode: (bytes: Buffer) => unknown,
  observed: (error: ServiceError | null) => void,
) {
  return (error: ServiceError | null, bytes?: Buffer) => {
    const { resolve, reject } = pending;
    pending.resolve = pending.reject = undefined;
    if (!resolve || !reject) return;
    observed(error);
    if (error) return reject(grpcErrorToAppError(error));
    let response: unknown;
    try {
      response = decode(bytes ?? Buffer.alloc(0));
    } catch (cause) {
      // What grpc-js answers when its own decoding fails.
      return reject(grpcErrorToAppError(responseParsingError(cause)));
    }
    resolve(response);
  };
}

function responseParsingError(cause: unknown): ServiceError {
  const details = `Response message parsing error: ${cause instanceof Error ? cause.message : String(cause)}`;
  return Object.assign(new Error(`${status.INTERNAL} INTERNAL: ${details}`), {
    code: status.INTERNAL,
    details,
    metadata: new Metadata(),
  });
}
