import type { IncomingMessage, ServerResponse } from 'node:http';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyRequest,
  FastifyTypeProvider,
  RawServerDefault,
} from 'fastify';
import { nameTraceInLogs } from '@sts/logger/create-logger';
import { httpRequestDuration, httpRequests } from '@sts/observability/metrics';
import {
  isTracingOn,
  linkFromHeaders,
  SpanKind,
  startRootSpan,
  type Attributes,
  type Context,
  type TracedScope,
} from '@sts/observability/trace-context';
import type { CallOptions } from '@sts/grpc/service-types';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's span while tracing is on (observeRequests); null otherwise. */
    traceScope: TracedScope | null;
  }
}

/**
 * Counts and times every request by method, route pattern (`/api/devices/:id`, never the id) and
 * status; with tracing on, gives each request a server span, which the gRPC calls and NATS messages it
 * causes continue: the gateway passes the span's context by hand (`callOptionsFor`,
 * `traceContextOf`), and a sampled request's log lines name its trace.
 *
 * The gateway is the edge: a `traceparent` from the internet is recorded as a link, not adopted as
 * the parent, so a caller cannot choose our trace ids or force every request to be sampled.
 *
 * Every request pays for this, so it stays lean: the scope is a request decoration (a WeakMap entry
 * per request costs the garbage collector more than the span), hooks take callbacks (no promise per
 * request), a request that sampling leaves out gets no attributes (trace-context.ts), and nothing
 * changes an object's shape per request (docs/benchmarks.md: V8's inline caches go megamorphic).
 */
export function observeRequests<Logger extends FastifyBaseLogger, Provider extends FastifyTypeProvider>(
  app: FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, Logger, Provider>,
): void {
  app.decorateRequest('traceScope', null);
  if (isTracingOn()) {
    app.addHook('onRequest', (request, reply, done) => {
      const link = request.headers.traceparent === undefined ? undefined : linkFromHeaders(request.headers);
      const scope = startRootSpan(SpanKind.SERVER, link ? [link] : undefined, describeRequest, request);
      request.traceScope = scope;
      // The request's own logger (also the reply's) names a sampled trace when it writes a line: no
      // child logger and no new bindings per sampled request, and every request's logger one shape
      // (create-logger.ts says why).
      nameTraceInLogs(request.log, scope.logFields());
      done();
    });
  }
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const labels = { method: request.method, route, status_code: String(reply.statusCode) };
    httpRequests.inc(labels);
    httpRequestDuration.observe(labels, reply.elapsedTime / 1000);
    const scope = request.traceScope;
    if (scope) {
      scope.setAttribute('http.response.status_code', reply.statusCode);
      if (reply.statusCode >= 500) scope.fail(undefined, `HTTP ${reply.statusCode}`);
      scope.end();
    }
    done();
  });
}

/** A recorded request span's name and attributes (only a sampled request pays for them). */
function describeRequest(request: FastifyRequest): { name: string; attributes: Attributes } {
  // Fastify builds `routeOptions` anew on every read.
  const route = request.routeOptions.url ?? 'unmatched';
  return {
    name: `${request.method} ${route}`,
    attributes: {
      'http.request.method': request.method,
      'http.route': route,
      'url.path': request.url.split('?')[0] ?? '/',
      'sts.request_id': request.id,
    },
  };
}

/** The request's trace context, to hand to what it causes (undefined while tracing is off). */
export function traceContextOf(request: FastifyRequest): Context | undefined {
  return request.traceScope?.context;
}

/** What every gRPC call made for a request carries: its request id and its trace context. */
export function callOptionsFor(request: FastifyRequest, deadlineMs?: number): CallOptions {
  return { requestId: request.id, traceContext: traceContextOf(request), deadlineMs };
}
