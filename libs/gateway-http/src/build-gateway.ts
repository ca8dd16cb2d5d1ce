import { randomUUID } from 'node:crypto';
import Fastify, { LogController } from 'fastify';
import swagger from '@fastify/swagger';
import { apiDocs } from './contract/api-docs';
import {
  jsonSchemaTransform,
  jsonSchemaTransformObject,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import type { AccessTokenVerifier } from '@sts/auth/access-token-verifier';
import { AppError } from '@sts/errors/app-error';
import type { Logger } from '@sts/logger/create-logger';
import { authenticate } from './auth/caller-context';
import type { DashboardHosting } from './dashboard/dashboard-hosting';
import { apiDocsServed, type GatewayConfig } from './gateway-config';
import { problemErrorHandler, sendProblem } from './contract/problem-details';
import type { GatewayCaches } from './caching/gateway-caches';
import { responseSerializerCompiler } from './contract/response-serializer';
import { EnrollFailureLimiter } from './limits/enroll-failure-limiter';
import { RateLimiter } from './limits/rate-limiter';
import { limitWrites } from './limits/write-limiter';
import type { WindowCounter } from './limits/window-counter';
import { observeRequests } from './observability/http-observability';
import type { DeviceCredentials } from './auth/device-credentials';
import { billingRoutes, billingWebhookRoute } from './routes/billing-routes';
import { alertEndpointRoutes } from './routes/alert-endpoint-routes';
import { analyticsRoutes } from './routes/analytics-routes';
import { deviceEnrollRoute } from './routes/device-enroll-route';
import { deviceRoutes } from './routes/device-routes';
import { enrollmentRoutes } from './routes/enrollment-routes';
import { healthRoutes } from './routes/health-routes';
import { Readiness } from './observability/readiness';
import { acceptInviteRoute, inviteRoutes } from './routes/invite-routes';
import { memberRoutes } from './routes/member-routes';
import { notificationRoutes } from './routes/notification-routes';
import { sessionRoutes } from './routes/session-routes';
import { telemetryRoute } from './routes/telemetry-route';
import { telemetryBodyLimit, type TelemetrySink } from './telemetry/telemetry-sink';
import type { UpstreamClients } from './upstream-clients';

export interface GatewayDependencies {
  config: Pick<
    GatewayConfig,
    | 'BODY_LIMIT_BYTES'
    | 'TRUST_PROXY'
    | 'HSTS_MAX_AGE_SECONDS'
    | 'API_DOCS_ENABLED'
    | 'NODE_ENV'
    | 'RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE'
    | 'ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE'
    | 'ENROLL_FAILURES_PER_MINUTE'
    | 'ENROLL_KEY_FAILURES_PER_MINUTE'
    | 'TELEMETRY_BODY_LIMIT_BYTES'
    | 'TELEMETRY_BATCHES_PER_DEVICE_PER_MINUTE'
    | 'TELEMETRY_ORG_BYTES_PER_MINUTE'
    | 'DEVICE_AUTH_FAILURES_PER_MINUTE'
    | 'STRIPE_WEBHOOK_FAILURES_PER_MINUTE'
    | 'WRITES_PER_SUBJECT_PER_MINUTE'
    | 'WRITES_PER_ORG_PER_MINUTE'
  >;
  caches: GatewayCaches;
  credentials: DeviceCredentials;
  /** Where accepted telemetry batches go (JetStream in production). */
  telemetry: TelemetrySink;
  /**
   * The largest message the telemetry sink's NATS server takes (`nc.info.max_payload`); the telemetry body
   * limit stays below it. Unknown (tests without NATS): TELEMETRY_BODY_LIMIT_BYTES as configured.
   */
  natsMaxPayloadBytes?: number;
  /** Counts of every rate limit: shared by the replicas (NATS KV) in production, local in unit tests. */
  limits: WindowCounter;
  /** What `/readyz` asks (NATS, the services); everything ready when absent (tests without them). */
  readiness?: Readiness;
  logger: Logger;
  clients: UpstreamClients;
  verifier: AccessTokenVerifier;
  /** The dashboard's build, served beside /api; absent: the gateway serves the API only. */
  dashboard?: DashboardHosting;
  /** Clock of the telemetry time checks (epoch ms; the limits' windows follow `limits`' clock); tests pin it. */
  now?: () => number;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** The public REST API of contract.md. Knows HTTP; every decision is made by the services behind it. */
export async function buildGateway({
  config,
  logger,
  clients,
  verifier,
  caches,
  credentials,
  telemetry,
  natsMaxPayloadBytes,
  limits,
  readiness = new Readiness({}),
  dashboard,
  now = Date.now,
}: GatewayDependencies) {
  const app = Fastify({
    loggerInstance: logger,
    // One line per request at debug (see onResponse below) instead of Fastify's two at info.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.BODY_LIMIT_BYTES,
    // A number trusts that many hops nearest the gateway (proxy-addr's rule, as Fastify documents it).
    trustProxy:
      typeof config.TRUST_PROXY === 'number' ? trustNearestHops(config.TRUST_PROXY) : config.TRUST_PROXY,
    requestIdHeader: false,
    // While closing, requests already on a connection are served (with `Connection: close`), not refused.
    return503OnClosing: false,
    genReqId: (request) => {
      const incoming = request.headers['x-request-id'];
      return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
    // Our ids and query values are short; this bounds parser work on hostile URLs.
    routerOptions: { maxParamLength: 200 },
    // Errors raised before routing (over-long or badly encoded URLs) get problem+json too.
    frameworkErrors: (error, request, reply) => {
      void sendProblem(
        reply.header('x-request-id', request.id),
        request,
        error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? new AppError('ROUTE_NOT_FOUND', 'No such resource')
          : new AppError('MALFORMED_REQUEST', 'The URL is not valid'),
      );
    },
  }).withTypeProvider<ZodTypeProvider>();

  // The API speaks JSON only; other bodies get 415 instead of reaching validation as strings.
  app.removeContentTypeParser(['text/plain']);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(responseSerializerCompiler);
  app.setErrorHandler(problemErrorHandler);
  app.setNotFoundHandler((request, reply) =>
    // Every page address of the dashboard is its index.html (the app routes in the browser).
    dashboard?.servesPage(request)
      ? dashboard.sendPage(reply)
      : sendProblem(
          reply,
          request,
          new AppError('ROUTE_NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0]}`),
        ),
  );
  app.decorateRequest('caller', null);
  observeRequests(app);
  const hsts = strictTransportSecurity(config.HSTS_MAX_AGE_SECONDS);
  if (hsts && config.TRUST_PROXY === false)
    logger.warn(
      'HSTS_MAX_AGE_SECONDS is set but TRUST_PROXY is false: no request is seen as HTTPS, so no Strict-Transport-Security is sent',
    );
  // Hooks every request runs take callbacks: an async hook costs a promise per request.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    // Browsers take HSTS over HTTPS only (RFC 6797 8.1), and it must not be sent over HTTP (7.2).
    if (hsts && request.protocol === 'https') reply.header('strict-transport-security', hsts);
    // Draining: the client's next request opens a connection, which the load balancer sends elsewhere.
    if (readiness.draining) reply.header('connection', 'close');
    done(null, payload);
  });
  app.addHook('onResponse', (request, reply, done) => {
    const entry = {
      method: request.method,
      url: request.url.split('?')[0],
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime),
      reqId: request.id,
    };
    if (reply.statusCode >= 500) request.log.warn(entry, 'request completed');
    else request.log.debug(entry, 'request completed');
    done();
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Security Telemetry Service API',
        version: '1.0.0',
        description:
          'Organization membership, device enrollment, analytics, alerting and billing. Errors are application/problem+json with a stable `code`.',
      },
      components: {
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      },
    },
    transform: jsonSchemaTransform,
    transformObject: jsonSchemaTransformObject,
  });
  // Swagger UI, with the dashboard's security headers; none in production unless API_DOCS_ENABLED=true.
  if (apiDocsServed(config)) await app.register(apiDocs);
  if (dashboard) await app.register(dashboard.assets);
  // Every rate limit, through one limiter over the shared counts: 429 RATE_LIMITED with Retry-After.
  const limiter = new RateLimiter(limits);

  // Routes without user authentication.
  await app.register(healthRoutes, { readiness });
  await app.register(acceptInviteRoute, {
    clients,
    limiter,
    perMinute: config.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE,
  });
  await app.register(deviceEnrollRoute, {
    clients,
    limiter,
    perAddressPerMinute: config.ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE,
    failures: new EnrollFailureLimiter(limiter, {
      perAddress: config.ENROLL_FAILURES_PER_MINUTE,
      perKey: config.ENROLL_KEY_FAILURES_PER_MINUTE,
    }),
  });
  await app.register(billingWebhookRoute, {
    clients,
    caches,
    limiter,
    failuresPerMinute: config.STRIPE_WEBHOOK_FAILURES_PER_MINUTE,
    now,
  });
  const telemetryLimit = telemetryBodyLimit(config.TELEMETRY_BODY_LIMIT_BYTES, natsMaxPayloadBytes);
  if (telemetryLimit < config.TELEMETRY_BODY_LIMIT_BYTES) {
    logger.info(
      {
        configured: config.TELEMETRY_BODY_LIMIT_BYTES,
        natsMaxPayloadBytes,
        telemetryBodyLimit: telemetryLimit,
      },
      "telemetry batches are limited below TELEMETRY_BODY_LIMIT_BYTES to fit NATS's max_payload",
    );
  }
  await app.register(telemetryRoute, {
    credentials,
    sink: telemetry,
    bodyLimit: telemetryLimit,
    limiter,
    perDevicePerMinute: config.TELEMETRY_BATCHES_PER_DEVICE_PER_MINUTE,
    orgBytesPerMinute: config.TELEMETRY_ORG_BYTES_PER_MINUTE,
    authFailuresPerMinute: config.DEVICE_AUTH_FAILURES_PER_MINUTE,
    now,
  });

  // Everything else needs a bearer token.
  await app.register(async (authenticated) => {
    authenticated.addHook('onRequest', authenticate(verifier, clients, caches.callers));
    authenticated.addHook(
      'onRequest',
      limitWrites(limiter, {
        perSubject: config.WRITES_PER_SUBJECT_PER_MINUTE,
        perOrganization: config.WRITES_PER_ORG_PER_MINUTE,
      }),
    );
    await authenticated.register(sessionRoutes, { clients, licenses: caches.licenses });
    await authenticated.register(memberRoutes, { clients, caches });
    await authenticated.register(inviteRoutes, { clients });
    await authenticated.register(notificationRoutes, { clients });
    await authenticated.register(enrollmentRoutes, { clients });
    await authenticated.register(deviceRoutes, { clients, credentials });
    await authenticated.register(analyticsRoutes, { clients, caches });
    await authenticated.register(alertEndpointRoutes, { clients });
    await authenticated.register(billingRoutes, { clients, caches });
  });

  return app;
}

/** The Strict-Transport-Security value for a max-age in seconds; undefined for 0 (off). */
function strictTransportSecurity(maxAgeSeconds: number): string | undefined {
  return maxAgeSeconds > 0 ? `max-age=${maxAgeSeconds}; includeSubDomains` : undefined;
}

function trustNearestHops(count: number): (address: string, hop: number) => boolean {
  return (_address, hop) => hop < count;
}
