import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '@sts/config/load-config';
import { DevOidcProvider } from '@sts/dev-oidc/dev-oidc-provider';
import { gatewayEnvSchema } from '@sts/gateway-http/gateway-config';
import { startGateway, type RunningGateway } from '@sts/gateway-http/start-gateway';
import { identityEnvSchema } from '@sts/identity-infra/identity-config';
import { startIdentityService } from '@sts/identity-infra/start-identity-service';
import { billingEnvSchema } from '@sts/billing-infra/billing-config';
import { enrollmentEnvSchema } from '@sts/enrollment-infra/enrollment-config';
import { startEnrollmentService } from '@sts/enrollment-infra/start-enrollment-service';
import { startBillingService } from '@sts/billing-infra/start-billing-service';
import { analyticsEnvSchema } from '@sts/analytics-infra/analytics-config';
import { startAnalyticsService } from '@sts/analytics-infra/start-analytics-service';
import { testClickHouseDatabase } from '@sts/testing/clickhouse';
import { notificationEnvSchema } from '@sts/notification-infra/notification-config';
import { startNotificationService } from '@sts/notification-infra/start-notification-service';
import { createLogger } from '@sts/logger/create-logger';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { NATS_ADMIN_USER, natsAuthorizationConfig } from '@sts/nats/nats-permissions';
import { provisionNatsTopology } from '@sts/nats/nats-topology';
import { devicePurgesStreamName } from '@sts/nats/event-stream';
import { eventsStreamName } from '@sts/events/subjects';
import { telemetryStreamName } from '@sts/events/telemetry';
import { startNatsServer } from '@sts/testing/nats-server';
import { SERVICE_NAMES, type ServiceName } from '@sts/vocabulary/services';
import { Lifecycle } from '@sts/runtime/lifecycle';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase } from '@sts/testing/postgres';
import { freePort } from '@sts/testing/free-port';
import { testServiceAuth } from '@sts/testing/service-auth';
import { startSmtpSink, type SmtpSink } from '@sts/stand-ins/smtp-sink';
import { startStripeStandIn, type StripeStandIn } from '@sts/stand-ins/stripe-stand-in';
import { startStripeWithHostedPages } from '@sts/stand-ins/stripe-hosted-pages';

/** Polls until a probe yields a value; re-exported for the e2e specs. */
export { eventually } from '@sts/testing/eventually';

export const DASHBOARD_CLIENT_ID = 'sts-dashboard';

/** The dashboard's build, which `npm run build` makes (`npm test` builds before the tests). */
function requireDashboardBuild(): string {
  const directory = resolve(__dirname, '../../../dist/apps/dashboard');
  if (!existsSync(join(directory, 'index.html')))
    throw new Error(`no dashboard build in ${directory}: run npm run build first`);
  return directory;
}

export interface ApiResponse<Body = unknown> {
  status: number;
  headers: Headers;
  body: Body;
}

export interface SystemUnderTest {
  gateway: RunningGateway;
  /** The NATS namespace of this system's streams and buckets. */
  namespace: string;
  /** host:port of the services' gRPC servers, for checks no public route offers. */
  grpcAddresses: Record<'identity' | 'notification' | 'billing' | 'enrollment' | 'analytics', string>;
  /** The ClickHouse database of the analytics service (a client on it, for checks). */
  clickhouse: ReturnType<typeof testClickHouseDatabase>;
  /** The services' own signing keys (each process its own) and credentials made with them. */
  serviceAuth: ReturnType<typeof testServiceAuth>;
  idp: DevOidcProvider;
  mail: SmtpSink;
  /** The payment provider's API (a local stand-in speaking Stripe's protocol) billing talks to. */
  stripe: StripeStandIn;
  /** The webhook signing secret billing verifies payment events with. */
  stripeWebhookSecret: string;
  /** A user access token for this e-mail, signed by the trusted identity provider. */
  tokenFor(email: string, options?: { name?: string; emailVerified?: boolean }): Promise<string>;
  api<Body = unknown>(
    method: string,
    path: string,
    options?: { token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> },
  ): Promise<ApiResponse<Body>>;
  /**
   * Whether every durable consumer of the system's streams has nothing left to deliver or to be
   * acknowledged: all that was published is handled, so nothing more can land later.
   */
  consumersIdle(): Promise<boolean>;
  stop(): Promise<void>;
}

/**
 * Starts the whole system in this process on random ports: its own PostgreSQL database, its own
 * NATS namespace, a local OpenID provider (JWKS over HTTP) and an SMTP sink. Nothing is mocked.
 */
export async function startSystem(
  options: {
    gatewayEnv?: Record<string, string>;
    analyticsEnv?: Record<string, string>;
    notificationEnv?: Record<string, string>;
    billingEnv?: Record<string, string>;
    /**
     * A NATS server of the system's own with a user per service (least privilege) and the topology made
     * beforehand by the admin, as nats-setup does in production; otherwise the shared server, no users.
     */
    natsUsers?: boolean;
    /**
     * Serve the dashboard's build (dist/apps/dashboard, made by `npm run build`) and register it at the
     * identity provider as a public client, so a browser can sign in (the gateway then listens on a port
     * chosen beforehand: the provider must know the redirect URI).
     */
    dashboard?: boolean;
    /** Lifetime of the identity provider's access tokens (default an hour): short, to see renewals. */
    tokenTtlSeconds?: number;
  } = {},
): Promise<SystemUnderTest> {
  const lifecycle = new Lifecycle();
  const logger = createLogger('e2e', process.env.E2E_LOG_LEVEL ?? 'silent');
  try {
    const database = await createTestDatabase('e2e');
    lifecycle.add('database', () => database.drop());
    const namespace = uniqueNatsNamespace();
    const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
    let natsUrlOf = (_service: ServiceName) => natsUrl;
    let adminUrl = natsUrl;
    let passwords: Record<ServiceName | typeof NATS_ADMIN_USER, string> | undefined;
    if (options.natsUsers) {
      const generated = Object.fromEntries(
        [...SERVICE_NAMES, NATS_ADMIN_USER].map((user) => [user, randomBytes(18).toString('base64url')]),
      ) as Record<ServiceName | typeof NATS_ADMIN_USER, string>;
      const server = await startNatsServer(natsAuthorizationConfig(namespace, generated));
      lifecycle.add('nats server', () => server.stop());
      adminUrl = server.url(NATS_ADMIN_USER, generated[NATS_ADMIN_USER]);
      natsUrlOf = (service) => server.url(service, generated[service]);
      passwords = generated;
    }
    // The tests' own connection, as the admin where there are users: provisioning, checks, cleanup.
    const admin = await connectJetStream({ url: adminUrl, name: 'e2e-admin', logger });
    lifecycle.add('nats admin connection', () => admin.close());
    if (passwords) {
      await provisionNatsTopology(
        admin.nc,
        admin.jsm,
        { namespace, telemetryMaxBytes: 256 * 1024 * 1024, telemetryConsumers: {} },
        logger,
      );
    } else {
      lifecycle.add('nats streams', () => deleteNamespaceStreams(admin.jsm, namespace));
    }

    const audience = 'https://api.e2e.test';
    const gatewayPort = options.dashboard ? await freePort() : 0;
    const dashboardOrigin = `http://127.0.0.1:${gatewayPort}`;
    const idp = await DevOidcProvider.create({
      audience,
      ...(options.tokenTtlSeconds ? { tokenTtlSeconds: options.tokenTtlSeconds } : {}),
      ...(options.dashboard
        ? {
            publicClients: [
              {
                clientId: DASHBOARD_CLIENT_ID,
                redirectUris: [`${dashboardOrigin}/auth/callback`],
                postLogoutRedirectUris: [`${dashboardOrigin}/`],
              },
            ],
          }
        : {}),
    });
    const issuer = await idp.start();
    lifecycle.add('identity provider', () => idp.stop());
    const mail = await startSmtpSink();
    lifecycle.add('smtp sink', () => mail.close());

    const stripeWebhookSecret = `whsec_${randomBytes(24).toString('base64url')}`;
    // With the dashboard, Stripe's hosted pages too (a browser pays there, and the signed event goes to
    // the gateway's webhook, as Stripe sends it); the API alone otherwise.
    const stripe = options.dashboard
      ? (
          await startStripeWithHostedPages({
            webhook: { url: `${dashboardOrigin}/api/billing/webhook`, secret: stripeWebhookSecret },
          })
        ).standIn
      : await startStripeStandIn();
    lifecycle.add('stripe stand-in', () => stripe.close());

    const serviceAuth = testServiceAuth();
    const shared = {
      SERVICE_TRUSTED_KEYS: serviceAuth.SERVICE_TRUSTED_KEYS,
      NODE_ENV: 'test',
      LOG_LEVEL: 'silent',
      DATABASE_URL: database.url,
      NATS_URL: natsUrl,
      NATS_NAMESPACE: namespace,
      SECRET_SEALING_KEY: randomBytes(32).toString('base64'),
      GRPC_PORT: '0',
      SMTP_URL: mail.url,
      // The invitation e-mail links to the dashboard: the one served here, when there is one.
      PUBLIC_APP_URL: options.dashboard ? dashboardOrigin : 'https://dashboard.e2e.test',
      ENROLLMENT_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      LAST_SEEN_FLUSH_MS: '50',
      // The cluster tier's: three copies of every stream and bucket on its NATS cluster.
      NATS_STREAM_REPLICAS: process.env.NATS_STREAM_REPLICAS ?? '1',
    };
    const identity = await startIdentityService(
      loadConfig(identityEnvSchema, { ...shared, NATS_URL: natsUrlOf('identity') }),
      logger,
    );
    lifecycle.add('identity', () => identity.stop());
    const notification = await startNotificationService(
      loadConfig(notificationEnvSchema, {
        ...shared,
        NATS_URL: natsUrlOf('notification'),
        IDENTITY_GRPC_ADDRESS: `127.0.0.1:${identity.grpcPort}`,
        SERVICE_SIGNING_KEY: serviceAuth.envOf('notification').SERVICE_SIGNING_KEY,
        ...options.notificationEnv,
      }),
      logger,
    );
    lifecycle.add('notification', () => notification.stop());
    const billing = await startBillingService(
      loadConfig(billingEnvSchema, {
        ...shared,
        NATS_URL: natsUrlOf('billing'),
        STRIPE_SECRET_KEY: stripe.apiKey,
        STRIPE_WEBHOOK_SECRET: stripeWebhookSecret,
        STRIPE_API_BASE: stripe.url,
        ...options.billingEnv,
      }),
      logger,
    );
    lifecycle.add('billing', () => billing.stop());
    const enrollment = await startEnrollmentService(
      loadConfig(enrollmentEnvSchema, { ...shared, NATS_URL: natsUrlOf('enrollment') }),
      logger,
    );
    lifecycle.add('enrollment', () => enrollment.stop());
    const clickhouse = testClickHouseDatabase('e2e');
    lifecycle.add('clickhouse database', () => clickhouse.drop());
    const analytics = await startAnalyticsService(
      loadConfig(analyticsEnvSchema, {
        ...shared,
        NATS_URL: natsUrlOf('analytics'),
        CLICKHOUSE_URL: clickhouse.url,
        CLICKHOUSE_DATABASE: clickhouse.name,
        CLICKHOUSE_CLUSTER: clickhouse.cluster ?? '',
        TELEMETRY_BATCH_WAIT_MS: '20',
        ...options.analyticsEnv,
      }),
      logger,
    );
    lifecycle.add('analytics', () => analytics.stop());

    const gateway = await startGateway(
      loadConfig(gatewayEnvSchema, {
        ...shared,
        NATS_URL: natsUrlOf('gateway'),
        PORT: String(gatewayPort),
        SERVICE_SIGNING_KEY: serviceAuth.envOf('gateway').SERVICE_SIGNING_KEY,
        ...(options.dashboard
          ? { DASHBOARD_OIDC_CLIENT_ID: DASHBOARD_CLIENT_ID, DASHBOARD_DIR: requireDashboardBuild() }
          : // No build there: the API only, whatever npm run build left in dist/.
            { DASHBOARD_DIR: join(tmpdir(), 'no-dashboard-here') }),
        OIDC_ISSUER: issuer,
        OIDC_AUDIENCE: audience,
        IDENTITY_GRPC_ADDRESS: `127.0.0.1:${identity.grpcPort}`,
        NOTIFICATION_GRPC_ADDRESS: `127.0.0.1:${notification.grpcPort}`,
        BILLING_GRPC_ADDRESS: `127.0.0.1:${billing.grpcPort}`,
        ENROLLMENT_GRPC_ADDRESS: `127.0.0.1:${enrollment.grpcPort}`,
        ANALYTICS_GRPC_ADDRESS: `127.0.0.1:${analytics.grpcPort}`,
        RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: '1000',
        ENROLL_FAILURES_PER_MINUTE: '1000',
        STRIPE_WEBHOOK_FAILURES_PER_MINUTE: '1000',
        // The suites make changes faster than people do; the limit itself: gateway-hardening.e2e-spec.ts.
        WRITES_PER_SUBJECT_PER_MINUTE: '100000',
        WRITES_PER_ORG_PER_MINUTE: '100000',
        // Invitees join at their login, in identity; the event that evicts the inviting organization's
        // member pages arrives a few milliseconds later, and these suites look at once. The eviction
        // itself is tested in cache-invalidation.e2e-spec.ts.
        MEMBER_LIST_CACHE_TTL_MS: '0',
        // Likewise analytics answers: these suites read figures the moment ClickHouse has them.
        ANALYTICS_CACHE_TTL_MS: '0',
        // Nothing balances load in front of it: stopping at once spares each suite the drain.
        SHUTDOWN_DRAIN_MS: '0',
        ...options.gatewayEnv,
      }),
      logger,
    );
    lifecycle.add('gateway', () => gateway.stop());

    return {
      gateway,
      namespace,
      grpcAddresses: {
        identity: `127.0.0.1:${identity.grpcPort}`,
        notification: `127.0.0.1:${notification.grpcPort}`,
        billing: `127.0.0.1:${billing.grpcPort}`,
        enrollment: `127.0.0.1:${enrollment.grpcPort}`,
        analytics: `127.0.0.1:${analytics.grpcPort}`,
      },
      clickhouse,
      serviceAuth,
      idp,
      mail,
      stripe,
      stripeWebhookSecret,
      tokenFor: (email, options = {}) => idp.issueUserToken({ email, ...options }),
      api: async <Body>(
        method: string,
        path: string,
        options: { token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
      ) => {
        const headers: Record<string, string> = { ...options.headers };
        if (options.token) headers.authorization = `Bearer ${options.token}`;
        let body: string | undefined = options.rawBody;
        if (options.body !== undefined) {
          headers['content-type'] ??= 'application/json';
          body = JSON.stringify(options.body);
        }
        const response = await fetch(`${gateway.url}${path}`, { method, headers, body });
        const text = await response.text();
        const type = response.headers.get('content-type') ?? '';
        const parsed: unknown = text && type.includes('json') ? JSON.parse(text) : text;
        return { status: response.status, headers: response.headers, body: parsed as Body };
      },
      consumersIdle: async () => {
        try {
          for (const stream of [
            eventsStreamName(namespace),
            telemetryStreamName(namespace),
            devicePurgesStreamName(namespace),
          ]) {
            let consumers: number;
            try {
              consumers = (await admin.jsm.streams.info(stream)).state.consumer_count;
            } catch (error) {
              // A stream nobody has made yet (the purges stream before any deletion) has nothing waiting.
              if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)
                continue;
              throw error;
            }
            let listed = 0;
            for await (const consumer of admin.jsm.consumers.list(stream)) {
              listed++;
              if (consumer.num_pending > 0 || consumer.num_ack_pending > 0) return false;
            }
            // On a cluster, a consumer whose leader is gone (a NATS server lost, an election under way) is
            // left out of the list: it may still have messages to deliver.
            if (listed < consumers) return false;
          }
          return true;
        } catch {
          // Not answered (a leader election, a timeout): not known to be idle.
          return false;
        }
      },
      stop: () => lifecycle.close(),
    };
  } catch (error) {
    await lifecycle.close();
    throw error;
  }
}

/** The organization's enrollment key (made when it has none) and a fresh one-time code, as an ORG_ADMIN gets them. */
export async function enrollmentCredentials(
  system: SystemUnderTest,
  adminToken: string,
): Promise<{ key: string; code: string }> {
  const existing = await system.api<{ key: string }>('GET', '/api/enrollment-key', { token: adminToken });
  const key =
    existing.status === 200
      ? existing.body.key
      : (await system.api<{ key: string }>('POST', '/api/enrollment-key', { token: adminToken })).body.key;
  const codes = await system.api<{ codes: { code: string }[] }>('POST', '/api/enrollment-codes', {
    token: adminToken,
    body: { count: 1 },
  });
  return { key, code: codes.body.codes[0]!.code };
}

/** A device enrolled in the admin's organization through the public API, as an agent enrolls. */
export async function enrollDevice(
  system: SystemUnderTest,
  adminToken: string,
  machineId: string,
  hostname = machineId,
): Promise<{ key: string; device_id: string; device_token: string }> {
  const { key, code } = await enrollmentCredentials(system, adminToken);
  const enrolled = await system.api<{ device_id: string; device_token: string }>(
    'POST',
    '/api/device/enroll',
    {
      headers: { 'x-enrollment-key': key },
      body: { code, machine_id: machineId, hostname, metadata: {} },
    },
  );
  if (enrolled.status !== 200) throw new Error(`enrolling ${machineId}: HTTP ${enrolled.status}`);
  return { key, ...enrolled.body };
}

const execFileAsync = promisify(execFile);

/** `agent enroll` against the system's gateway with a key and code, its settings written to `config`. */
export function enrollAgent(
  system: Pick<SystemUnderTest, 'gateway'>,
  enrollment: { key: string; code: string; config: string; machineId: string; hostname?: string },
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { key, code, config, machineId, hostname } = enrollment;
  return runAgent(
    'enroll',
    '--server',
    system.gateway.url,
    '--key',
    key,
    '--code',
    code,
    '--config',
    config,
    '--machine-id',
    machineId,
    ...(hostname === undefined ? [] : ['--hostname', hostname]),
  );
}

/** Runs the agent CLI from source as a device would; its exit code (0 on success), stdout and stderr. */
export function runAgent(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return execFileAsync(process.execPath, ['--import', 'tsx', 'apps/agent/src/main.ts', ...args]).then(
    (result) => ({ code: 0, ...result }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  );
}
