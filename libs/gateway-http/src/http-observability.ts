import type { IncomingMessage, ServerResponse } from 'node:http';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyRequest,
  FastifyTypeProvider,
  RawServerDefault,
} from 'fastify';
import { httpRequestDuration, httpRequests } from '@sts/observability/metrics';
import {
  isTracingOn,
  linkFromHeaders,
  NEW_TRACE,
  SpanKind,
  startSpan,
  type TracedScope,
} from '@sts/observability/trace-context';

const scopes = new WeakMap<FastifyRequest, TracedScope>();

/**
 * Counts and times every request by method, route pattern (`/api/devices/:id`, never the id) and
 * status; with tracing on, runs each request in a server span that the gRPC calls and NATS messages
 * it causes continue.
 *
 * The gateway is the edge: a `traceparent` from the internet is recorded as a link, not adopted as
 * the parent, so a caller cannot choose our trace ids or force every request to be sampled.
 */
export function observeRequests<Logger extends FastifyBaseLogger, Provider extends FastifyTypeProvider>(
  app: FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, Logger, Provider>,
): void {
  if (isTracingOn()) {
    app.addHook('onRequest', (request, _reply, done) => {
      const link = linkFromHeaders(request.headers);
      // Fastify builds `routeOptions` anew on every read.
      const route = request.routeOptions.url ?? 'unmatched';
      const scope = startSpan(`${request.method} ${route}`, {
        kind: SpanKind.SERVER,
        parent: NEW_TRACE,
        links: link ? [link] : [],
        attributes: {
          'http.request.method': request.method,
          'http.route': route,
          'url.path': request.url.split('?')[0] ?? '/',
          'sts.request_id': request.id,
        },
      });
      scopes.set(request, scope);
      // A body arrives in later `data`/`end` events: their listeners (body parsing, then the handler)
      // must run in the span too. (The answer's `finish`, and the onResponse hooks, follow from the
      // handler's own write, so they do.)
      if (
        request.headers['content-length'] !== undefined ||
        request.headers['transfer-encoding'] !== undefined
      ) {
        scope.bindEmitter(request.raw);
      }
      scope.run(done);
    });
  }
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const status = String(reply.statusCode);
    httpRequests.inc({ method: request.method, route, status_code: status });
    httpRequestDuration.observe(
      { method: request.method, route, status_code: status },
      reply.elapsedTime / 1000,
    );
    const scope = scopes.get(request);
    if (!scope) return;
    scope.setAttribute('http.response.status_code', reply.statusCode);
    if (reply.statusCode >= 500) scope.fail(undefined, `HTTP ${reply.statusCode}`);
    scope.end();
  });
}
