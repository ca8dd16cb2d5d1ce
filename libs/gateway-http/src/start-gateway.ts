import { setTimeout as sleep } from 'node:timers/promises';
import {
  AccessTokenVerifier,
  accessTokenVerifierOptionsFromEnv,
  defaultJwksUrl,
} from '@sts/auth/access-token-verifier';
import { probeDevelopmentProvider } from '@sts/auth/development-provider';
import { ConfigError } from '@sts/config/load-config';
import type { Logger } from '@sts/logger/create-logger';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { buildGateway } from './build-gateway';
import { DashboardHosting } from './dashboard/dashboard-hosting';
import type { GatewayConfig } from './gateway-config';
import { GatewayCaches } from './caching/gateway-caches';
import { subscribeToCacheEvictions } from './caching/cache-invalidation';
import { Readiness } from './observability/readiness';
import { loadGrpcTls } from '@sts/grpc/grpc-tls';
import { probeGrpcHealth } from '@sts/grpc/health-probe';
import { createUpstreamClients } from './upstream-clients';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { ensureTelemetry } from '@sts/nats/nats-topology';
import { openLimitsBucket } from '@sts/nats/kv-buckets';
import { KvWindowCounter } from './limits/kv-window-counter';
import { DeviceCredentials, subscribeToDeviceChanges } from './auth/device-credentials';
import { jetStreamTelemetrySink } from './telemetry/telemetry-sink';
import { loggedLifecycle } from '@sts/runtime/lifecycle';
import { startObservability } from '@sts/observability/process-observability';

export interface RunningGateway {
  port: number;
  /** Port of GET /metrics; undefined without METRICS_PORT. */
  metricsPort: number | undefined;
  url: string;
  stop(): Promise<void>;
}

/** How long /readyz waits for one dependency. */
const READINESS_TIMEOUT_MS = 1_000;
/** How long a request waits for a shared rate-limit count before its replica counts alone. */
const LIMITS_TIMEOUT_MS = 500;
/** How long the start asks the identity provider's key set whether it is the development provider's. */
const PROVIDER_PROBE_TIMEOUT_MS = 3_000;

/**
 * With NODE_ENV=production, the ConfigError a gateway refuses to start with when the key set it would trust
 * is the development identity provider's (it signs in anyone as anyone). A provider that does not answer
 * within `timeoutMs` does not hold the start up: the verifier refuses such a key set whenever it comes
 * (`refuseDevelopmentProvider`).
 */
export async function developmentProviderRefusal(
  config: Pick<GatewayConfig, 'NODE_ENV' | 'OIDC_ISSUER' | 'OIDC_JWKS_URL'>,
  timeoutMs = PROVIDER_PROBE_TIMEOUT_MS,
): Promise<ConfigError | undefined> {
  if (config.NODE_ENV !== 'production') return undefined;
  const jwksUrl = config.OIDC_JWKS_URL ?? defaultJwksUrl(config.OIDC_ISSUER);
  if (!(await probeDevelopmentProvider(jwksUrl, timeoutMs))) return undefined;
  const variable = config.OIDC_JWKS_URL ? 'OIDC_JWKS_URL' : 'OIDC_ISSUER';
  return new ConfigError(
    `Invalid configuration:\n  - ${variable}: ${jwksUrl} is the development identity provider's key set ` +
      '(dev-idp signs in anyone as anyone); refused with NODE_ENV=production',
  );
}

/** Starts the gateway; `stop()` closes everything in reverse order, and so does a failed start. */
export async function startGateway(config: GatewayConfig, logger: Logger): Promise<RunningGateway> {
  const lifecycle = loggedLifecycle(logger);
  try {
    // First: the requests' spans and metrics are set up as the app is built. Each request's trace
    // context is passed by hand (callOptionsFor), never kept in AsyncLocalStorage.
    const observability = await startObservability('gateway', config, logger, 'explicit');
    lifecycle.add('metrics and traces', () => observability.stop());
    const tls = loadGrpcTls(config);
    const clients = createUpstreamClients(config, tls);
    lifecycle.add('grpc clients', () => clients.close());
    // Asked while the rest starts; answered before the gateway listens.
    const developmentProvider = developmentProviderRefusal(config);
    const verifier = new AccessTokenVerifier({
      ...accessTokenVerifierOptionsFromEnv(config),
      refuseDevelopmentProvider: config.NODE_ENV === 'production',
    });
    const caches = new GatewayCaches(config);
    const nats = await connectJetStream({
      url: config.NATS_URL,
      name: 'gateway',
      logger,
      readyTimeoutMs: config.NATS_READY_TIMEOUT_MS,
    });
    lifecycle.add('nats', () => nats.close());
    const subscriptions = subscribeToCacheEvictions(nats.nc, config.NATS_NAMESPACE, caches, logger);
    lifecycle.add('cache eviction subscriptions', () =>
      subscriptions.forEach((subscription) => subscription.unsubscribe()),
    );
    const credentials = new DeviceCredentials(clients, config.DEVICE_CACHE_TTL_MS);
    const deviceSubscriptions = subscribeToDeviceChanges(nats.nc, config.NATS_NAMESPACE, credentials, logger);
    lifecycle.add('device subscriptions', () =>
      deviceSubscriptions.forEach((subscription) => subscription.unsubscribe()),
    );
    // The analytics service creates the stream too; whichever starts first does it.
    await nats.untilAnswers('the telemetry stream', () =>
      ensureTelemetry(nats.jsm, config.NATS_NAMESPACE, logger, { replicas: config.NATS_STREAM_REPLICAS }),
    );
    const telemetry = jetStreamTelemetrySink(
      nats.js,
      config.NATS_NAMESPACE,
      config.TELEMETRY_PUBLISH_TIMEOUT_MS,
    );
    const limits = new KvWindowCounter(
      await nats.untilAnswers('the rate limits bucket', () =>
        openLimitsBucket(nats.nc, config.NATS_NAMESPACE, {
          timeoutMs: LIMITS_TIMEOUT_MS,
          replicas: config.NATS_STREAM_REPLICAS,
        }),
      ),
      { logger },
    );
    const service = (address: string) => () => probeGrpcHealth(address, READINESS_TIMEOUT_MS, tls);
    const readiness = new Readiness(
      {
        nats: () => nats.answers(),
        identity: service(config.IDENTITY_GRPC_ADDRESS),
        notification: service(config.NOTIFICATION_GRPC_ADDRESS),
        billing: service(config.BILLING_GRPC_ADDRESS),
        enrollment: service(config.ENROLLMENT_GRPC_ADDRESS),
        analytics: service(config.ANALYTICS_GRPC_ADDRESS),
      },
      ['nats'],
      READINESS_TIMEOUT_MS,
    );
    const refusal = await developmentProvider;
    if (refusal) throw refusal;
    const app = await buildGateway({
      config,
      logger,
      clients,
      verifier,
      caches,
      credentials,
      telemetry,
      natsMaxPayloadBytes: nats.nc.info?.max_payload,
      limits,
      readiness,
      dashboard: dashboardOf(config, logger),
    });
    // Closing stops listening, lets requests in flight finish, then closes the idle connections.
    lifecycle.add('http', () => app.close());
    await app.listen({ host: config.HOST, port: config.PORT });
    // Before that, a drain: /readyz fails and answers close their connections, while everything is still served.
    lifecycle.add('drain', async () => {
      readiness.startDraining();
      await sleep(config.SHUTDOWN_DRAIN_MS);
    });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.PORT;
    return {
      port,
      metricsPort: observability.metricsPort,
      url: `http://${config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST}:${port}`,
      stop: () => lifecycle.close(),
    };
  } catch (error) {
    await lifecycle.close();
    throw error;
  }
}

/**
 * The dashboard's build: DASHBOARD_DIR, else the one beside the gateway's bundle (the image), else
 * dist/apps/dashboard (npm start, from the sources).
 */
function dashboardOf(config: GatewayConfig, logger: Logger): DashboardHosting | undefined {
  const candidates = config.DASHBOARD_DIR
    ? [resolve(config.DASHBOARD_DIR)]
    : [join(dirname(process.argv[1] ?? '.'), 'dashboard'), resolve('dist/apps/dashboard')];
  const directory = candidates.find((candidate) => existsSync(join(candidate, 'index.html')));
  if (!directory) {
    logger.warn(
      { looked: candidates },
      'no dashboard build found (npm run build makes one); serving the API only',
    );
    return undefined;
  }
  const signIn = {
    issuer: config.OIDC_ISSUER,
    clientId: config.DASHBOARD_OIDC_CLIENT_ID,
    audience: config.OIDC_AUDIENCE,
  };
  logger.info({ directory, clientId: signIn.clientId }, 'serving the dashboard');
  return DashboardHosting.fromBuild({ directory, signIn });
}
