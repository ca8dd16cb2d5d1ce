import pino from 'pino';
import { REDACTED_PATHS, type Logger } from '@sts/logger/create-logger';
import { buildGateway, type GatewayDependencies } from '../build-gateway';
import type { TelemetryBatchMessage } from '@sts/events/telemetry';
import { DeviceCredentials } from '../auth/device-credentials';
import { GatewayCaches } from '../caching/gateway-caches';
import type { DashboardHosting } from '../dashboard/dashboard-hosting';
import { FakeUpstream } from './fake-upstream';
import { TestTokens } from './test-tokens';
import { LocalWindowCounter, type WindowCounter } from '../limits/window-counter';

export type TestGateway = Awaited<ReturnType<typeof startTestGateway>>;

/**
 * The real gateway (routes, hooks, validation, problem+json, OpenAPI, rate limit) over fake upstream
 * clients and a real token verifier with a local key; log lines are kept in `logs` for assertions.
 * Use `app.inject`; nothing listens on a port.
 */
export async function startTestGateway(
  config: Partial<GatewayDependencies['config']> = {},
  caches: Partial<ConstructorParameters<typeof GatewayCaches>[0]> = {},
  options: {
    /** The rate-limit counts (a shared NATS KV counter in integration tests); this gateway's own by default. */
    limits?: (context: { now: () => number; logger: Logger }) => WindowCounter;
    /** NATS's max_payload, as a connected gateway knows it (none by default). */
    natsMaxPayloadBytes?: number;
    /** How long device credentials are kept (not at all by default). */
    deviceCacheTtlMs?: number;
    /** A dashboard build to serve beside /api (none by default). */
    dashboard?: DashboardHosting;
  } = {},
) {
  // The enrollment failure windows are whole clock minutes: a test started at hh:mm:59 would see its
  // counts reset half-way. The clock starts mid-minute and moves only when a test moves it.
  const clock = { nowMs: Date.parse('2026-03-01T12:00:30.000Z') };
  const tokens = await TestTokens.create();
  const upstream = new FakeUpstream();
  const logs: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'debug', redact: { paths: REDACTED_PATHS, censor: '[redacted]' } },
    { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) },
  );
  const upstreamClients = upstream.clients();
  const credentials = new DeviceCredentials(upstreamClients, options.deviceCacheTtlMs ?? 0);
  // Telemetry accepted by the gateway, in order (JetStream's part has its own integration tests).
  const published: TelemetryBatchMessage[] = [];
  const now = () => clock.nowMs;
  const app = await buildGateway({
    config: {
      NODE_ENV: 'test',
      BODY_LIMIT_BYTES: 64 * 1024,
      TRUST_PROXY: false,
      HSTS_MAX_AGE_SECONDS: 0,
      RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: 30,
      ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: 600,
      ENROLL_FAILURES_PER_MINUTE: 20,
      ENROLL_KEY_FAILURES_PER_MINUTE: 200,
      TELEMETRY_BODY_LIMIT_BYTES: 2 * 1024 * 1024,
      TELEMETRY_BATCHES_PER_DEVICE_PER_MINUTE: 600,
      TELEMETRY_ORG_BYTES_PER_MINUTE: 64 * 1024 * 1024,
      DEVICE_AUTH_FAILURES_PER_MINUTE: 20,
      STRIPE_WEBHOOK_FAILURES_PER_MINUTE: 30,
      WRITES_PER_SUBJECT_PER_MINUTE: 600,
      WRITES_PER_ORG_PER_MINUTE: 2400,
      ...config,
    },
    // Most tests change what upstream answers between requests; caching has its own tests.
    caches: new GatewayCaches({
      CALLER_CACHE_TTL_MS: 0,
      LICENSE_CACHE_TTL_MS: 0,
      MEMBER_LIST_CACHE_TTL_MS: 0,
      ANALYTICS_CACHE_TTL_MS: 0,
      ...caches,
    }),
    logger,
    clients: upstreamClients,
    credentials,
    telemetry: async (batch) => {
      const duplicate = published.some(
        (p) => p.device_id === batch.device_id && p.batch_id === batch.batch_id,
      );
      if (!duplicate) published.push(batch);
      return { duplicate };
    },
    verifier: tokens.verifier,
    ...(options.natsMaxPayloadBytes === undefined
      ? {}
      : { natsMaxPayloadBytes: options.natsMaxPayloadBytes }),
    limits: options.limits ? options.limits({ now, logger }) : new LocalWindowCounter(now),
    ...(options.dashboard ? { dashboard: options.dashboard } : {}),
    now,
  });
  await app.ready();
  return { app, upstream, tokens, logs, clock, published, credentials };
}
