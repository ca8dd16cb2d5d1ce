import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DevOidcProvider } from '@sts/dev-oidc/dev-oidc-provider';
import { Lifecycle } from '@sts/runtime/lifecycle';
import { testClickHouseDatabase } from '@sts/testing/clickhouse';
import { eventually } from '@sts/testing/eventually';
import { testCertificateAuthority } from '@sts/stand-ins/https-receiver';
import { freePort } from '@sts/testing/free-port';
import { portOpen, ServiceProcess } from '@sts/testing/service-process';
import { startOtlpCollector, type OtlpCollector } from '@sts/stand-ins/otlp-collector';
import { startSmtpSink, type SmtpSink } from '@sts/stand-ins/smtp-sink';
import { startStripeStandIn, type StripeStandIn } from '@sts/stand-ins/stripe-stand-in';
import { testServiceAuth } from '@sts/testing/service-auth';
import type { ServiceName } from '@sts/vocabulary/services';
import { bundle, isolatedStores, requireBundles, ROOT } from './bundled-system';

const SERVICES = ['identity', 'notification', 'billing', 'enrollment', 'analytics'] as const;
const BUNDLES = [...SERVICES, 'gateway', 'agent', 'healthcheck'] as const;
const run = promisify(execFile);

/**
 * The production build, run as production runs it: every service from its bundle
 * (`node dist/apps/<app>/main.js`, no tsx, NODE_ENV=production) in a process of its own, talking gRPC
 * over mutual TLS, the agent's bundle as a device would run it. `npm test` builds the bundles first (`npm run build`, cached by Nx).
 */
describe('production bundles, end to end', () => {
  const lifecycle = new Lifecycle();
  const processes: ServiceProcess[] = [];
  let gatewayUrl: string;
  let ports: Record<(typeof SERVICES)[number] | 'gateway', number>;
  let metricsPorts: Record<(typeof SERVICES)[number] | 'gateway', number>;
  let collector: OtlpCollector;
  let tlsEnv: Record<'GRPC_TLS_CA_FILE' | 'GRPC_TLS_CERT_FILE' | 'GRPC_TLS_KEY_FILE', string>;
  let idp: DevOidcProvider;
  let stripe: StripeStandIn;
  let agentDir: string;
  let mail: SmtpSink;
  let start: (name: string, env: Record<string, string>) => ServiceProcess;
  let gatewayEnv: Record<string, string>;
  const webhookSecret = `whsec_${randomBytes(24).toString('base64url')}`;

  beforeAll(async () => {
    requireBundles(BUNDLES);
    const { database, natsUrl, namespace } = await isolatedStores(lifecycle, 'bundles');
    const clickhouse = testClickHouseDatabase('bundles');
    lifecycle.add('clickhouse', () => clickhouse.drop());
    const audience = 'https://api.bundles.test';
    // Plays a real provider: the production gateway refuses one that says it is the development one.
    idp = await DevOidcProvider.create({ audience, announceDevelopment: false });
    const issuer = await idp.start();
    lifecycle.add('identity provider', () => idp.stop());
    mail = await startSmtpSink();
    lifecycle.add('smtp sink', () => mail.close());
    stripe = await startStripeStandIn();
    lifecycle.add('stripe stand-in', () => stripe.close());
    collector = await startOtlpCollector();
    lifecycle.add('otlp collector', () => collector.close());
    agentDir = await mkdtemp(join(tmpdir(), 'sts-agent-'));
    lifecycle.add('agent dir', () => rm(agentDir, { recursive: true, force: true }));
    // Mutual TLS between the services, as the production overlay runs them: a CA made for this run and
    // one certificate (server and client use) every process presents.
    const ca = await testCertificateAuthority();
    const leaf = await ca.issueLocalhost({ clientAuth: true });
    tlsEnv = {
      GRPC_TLS_CA_FILE: join(agentDir, 'ca.pem'),
      GRPC_TLS_CERT_FILE: join(agentDir, 'tls.pem'),
      GRPC_TLS_KEY_FILE: join(agentDir, 'tls-key.pem'),
    };
    await writeFile(tlsEnv.GRPC_TLS_CA_FILE, ca.certPem);
    await writeFile(tlsEnv.GRPC_TLS_CERT_FILE, leaf.cert);
    await writeFile(tlsEnv.GRPC_TLS_KEY_FILE, leaf.key);
    // Stopped before the databases go (the lifecycle closes in reverse order).
    lifecycle.add('services', () =>
      Promise.all(processes.map((service) => service.stop())).then(() => undefined),
    );

    ports = Object.fromEntries(
      await Promise.all([...SERVICES, 'gateway'].map(async (name) => [name, await freePort()] as const)),
    ) as Record<(typeof SERVICES)[number] | 'gateway', number>;
    metricsPorts = Object.fromEntries(
      await Promise.all([...SERVICES, 'gateway'].map(async (name) => [name, await freePort()] as const)),
    ) as Record<(typeof SERVICES)[number] | 'gateway', number>;
    // Every process its own signing key, as in production.
    const serviceAuth = testServiceAuth();
    const shared = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      NODE_ENV: 'production',
      // The identity provider and the Stripe stand-in are this process, over http on loopback.
      ALLOW_LOOPBACK_HTTP: 'true',
      LOG_LEVEL: 'warn',
      DATABASE_URL: database.url,
      NATS_URL: natsUrl,
      NATS_NAMESPACE: namespace,
      SERVICE_TRUSTED_KEYS: serviceAuth.SERVICE_TRUSTED_KEYS,
      SECRET_SEALING_KEY: randomBytes(32).toString('base64'),
      PUBLIC_APP_URL: 'https://dashboard.bundles.test',
      // Metrics and traces on, as in production: spans to a collector stand-in, sent every 100 ms.
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      ...tlsEnv,
    };
    const env: Record<(typeof SERVICES)[number], Record<string, string>> = {
      identity: {},
      notification: { SMTP_URL: mail.url, IDENTITY_GRPC_ADDRESS: `127.0.0.1:${ports.identity}` },
      billing: {
        STRIPE_SECRET_KEY: stripe.apiKey,
        STRIPE_WEBHOOK_SECRET: webhookSecret,
        STRIPE_API_BASE: stripe.url,
      },
      enrollment: { ENROLLMENT_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64') },
      analytics: {
        CLICKHOUSE_URL: clickhouse.url,
        CLICKHOUSE_DATABASE: clickhouse.name,
        TELEMETRY_BATCH_WAIT_MS: '20',
      },
    };
    start = (name, extra) => {
      const service = new ServiceProcess(
        name,
        ['--enable-source-maps', bundle(name)],
        Object.assign({}, shared, serviceAuth.envOf(name as ServiceName), extra),
        ROOT,
      );
      processes.push(service);
      return service;
    };
    // As a release runs: a service refuses to start on a schema its migrations have not reached, the
    // migration job (MIGRATIONS=only) migrates and exits, then the replicas start (MIGRATIONS=check).
    const early = start(
      'billing',
      Object.assign({ GRPC_PORT: String(ports.billing), MIGRATIONS: 'check' }, env.billing),
    );
    expect(await early.finished()).toBe('code 1');
    expect(early.tail()).toMatch(/pending migration/);
    processes.splice(processes.indexOf(early), 1);
    const jobs = SERVICES.map((name) =>
      start(`${name}`, Object.assign({ GRPC_PORT: '0', MIGRATIONS: 'only' }, env[name])),
    );
    expect(await Promise.all(jobs.map((job) => job.finished()))).toEqual(SERVICES.map(() => 'code 0'));
    processes.splice(0, processes.length);
    for (const name of SERVICES) {
      const service = start(
        name,
        Object.assign(
          { GRPC_PORT: String(ports[name]), MIGRATIONS: 'check', METRICS_PORT: String(metricsPorts[name]) },
          env[name],
        ),
      );
      await service.waitUntil(`gRPC port ${ports[name]}`, () => portOpen(ports[name]));
    }
    gatewayEnv = {
      PORT: String(ports.gateway),
      OIDC_ISSUER: issuer,
      OIDC_AUDIENCE: audience,
      IDENTITY_GRPC_ADDRESS: `127.0.0.1:${ports.identity}`,
      NOTIFICATION_GRPC_ADDRESS: `127.0.0.1:${ports.notification}`,
      BILLING_GRPC_ADDRESS: `127.0.0.1:${ports.billing}`,
      ENROLLMENT_GRPC_ADDRESS: `127.0.0.1:${ports.enrollment}`,
      ANALYTICS_GRPC_ADDRESS: `127.0.0.1:${ports.analytics}`,
      ANALYTICS_CACHE_TTL_MS: '0',
      METRICS_PORT: String(metricsPorts.gateway),
      // Every request's line (debug) names its trace.
      LOG_LEVEL: 'debug',
    };
    const gateway = start('gateway', gatewayEnv);
    gatewayUrl = `http://127.0.0.1:${ports.gateway}`;
    await gateway.waitUntil(
      'GET /api/analytics/health → 200',
      async () => (await fetch(`${gatewayUrl}/api/analytics/health`)).status === 200,
    );
  }, 120_000);

  afterAll(async () => {
    await lifecycle.close();
  });

  const api = async <Body>(method: string, path: string, token?: string, body?: unknown) => {
    const headers: Record<string, string> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(`${gatewayUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : undefined) as Body };
  };
  const agent = (...args: string[]) =>
    run(process.execPath, ['--enable-source-maps', bundle('agent'), ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    });

  it('enrolls a device with the agent, counts its telemetry, and activates a license through a payment event', async () => {
    const admin = await idp.issueUserToken({ email: 'admin@bundles.test', name: 'Admin' });
    const session = await api<{ org: { id: string }; license: { status: string } }>(
      'GET',
      '/api/session',
      admin,
    );
    expect(session.status).toBe(200);
    expect(session.body.license.status).toBe('pending');

    const key = await api<{ key: string }>('POST', '/api/enrollment-key', admin);
    const codes = await api<{ codes: { code: string }[] }>('POST', '/api/enrollment-codes', admin, {
      count: 1,
    });
    const config = join(agentDir, 'agent.json');
    await agent(
      'enroll',
      '--server',
      gatewayUrl,
      '--key',
      key.body.key,
      '--code',
      codes.body.codes[0]!.code,
      '--config',
      config,
    );
    await agent('simulate', '--events', '40', '--hours', '1', '--config', config);
    const summary = await eventually(async () => {
      const answer = await api<{ total_analyzed: number }>('GET', '/api/analytics/summary?window=24h', admin);
      return answer.body.total_analyzed === 40 ? answer.body : undefined;
    }, 20_000);
    expect(summary.total_analyzed).toBe(40);

    const checkout = await api<{ url: string }>('POST', '/api/billing/checkout-session', admin, {
      plan: 'enterprise',
      cycle: 'annual',
    });
    expect(checkout.status).toBe(200);
    const { session: paid } = stripe.completeCheckout(checkout.body.url.split('/').pop()!);
    const { payload, signature } = stripe.signed(
      stripe.event('checkout.session.completed', paid),
      webhookSecret,
    );
    const webhook = await fetch(`${gatewayUrl}/api/billing/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      body: payload,
    });
    expect(webhook.status).toBe(200);
    const after = await api<{ license: { plan: string; status: string } }>('GET', '/api/session', admin);
    expect(after.body.license).toMatchObject({ plan: 'enterprise', status: 'active' });
    const feed = await eventually(async () => {
      const items = (await api<{ type: string }[]>('GET', '/api/notifications', admin)).body;
      return items.length >= 3 ? items : undefined;
    }, 10_000);
    expect(feed.map((item) => item.type).sort()).toEqual([
      'billing.updated',
      'billing.updated',
      'device.enrolled',
    ]);
  });

  it('traces one request through the gateway, identity, its outbox and the e-mail the event causes', async () => {
    const admin = await idp.issueUserToken({ email: 'admin@bundles.test', name: 'Admin' });
    const invite = await api<{ id: string }>('POST', '/api/invites', admin, {
      email: 'traced@bundles.test',
      role: 'ANALYST',
    });
    expect(invite.status).toBe(201);
    const request = await eventually(async () =>
      collector.spans.find((span) => span.service === 'gateway' && span.name === 'POST /api/invites'),
    );
    const handled = await eventually(
      async () =>
        collector.spans.find(
          (span) => span.traceId === request.traceId && span.name === 'handle invite.created',
        ),
      10_000,
    );
    const trace = collector.spans.filter((span) => span.traceId === request.traceId);
    const byId = new Map(trace.map((span) => [span.spanId, span]));
    // From the consumer back to the request: every step's parent is the one before it.
    const chain: string[] = [];
    for (
      let span: (typeof trace)[number] | undefined = handled;
      span;
      span = byId.get(span.parentSpanId ?? '')
    ) {
      chain.unshift(`${span.service}: ${span.name}`);
    }
    expect(chain).toEqual([
      'gateway: POST /api/invites',
      expect.stringMatching(/^gateway: identity\.v1\.IdentityService\/\w+$/),
      expect.stringMatching(/^identity: identity\.v1\.IdentityService\/\w+$/),
      'identity: publish invite.created',
      'notification: handle invite.created',
    ]);
    expect(request.parentSpanId).toBeUndefined();
    // The gateway's line for the request names the trace.
    const gateway = processes.find((service) => service.name === 'gateway')!;
    expect(gateway.tail(100)).toContain(`"trace_id":"${request.traceId}"`);
  });

  it('exports Prometheus metrics from every process: requests, calls, events, outbox, ClickHouse, runtime', async () => {
    const scrape = async (name: (typeof SERVICES)[number] | 'gateway') => {
      const response = await fetch(`http://127.0.0.1:${metricsPorts[name]}/metrics`);
      expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      return response.text();
    };
    const value = (text: string, series: RegExp) =>
      text
        .split('\n')
        .filter((line) => series.test(line))
        .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
    const gateway = await scrape('gateway');
    expect(
      value(
        gateway,
        /^sts_http_server_requests_total\{method="GET",route="\/api\/session",status_code="200"\}/,
      ),
    ).toBeGreaterThanOrEqual(2);
    expect(
      value(
        gateway,
        /^sts_http_server_request_duration_seconds_count\{method="POST",route="\/api\/invites",status_code="201"\}/,
      ),
    ).toBe(1);
    expect(
      value(
        gateway,
        /^sts_grpc_client_handled_total\{grpc_method="identity\.v1\.IdentityService\/\w+",grpc_code="OK"\}/,
      ),
    ).toBeGreaterThan(0);
    expect(value(gateway, /^sts_nodejs_eventloop_lag_seconds /)).toBeGreaterThanOrEqual(0);
    expect(gateway).toMatch(/^sts_process_resident_memory_bytes \d+/m);

    const identity = await scrape('identity');
    expect(
      value(
        identity,
        /^sts_grpc_server_handled_total\{grpc_service="identity\.v1\.IdentityService",grpc_method="\w+",grpc_code="OK"\}/,
      ),
    ).toBeGreaterThan(0);
    expect(value(identity, /^sts_outbox_published_total\{schema="identity"\}/)).toBeGreaterThan(0);
    expect(identity).toMatch(/^sts_outbox_backlog_events\{schema="identity"\} 0$/m);
    expect(identity).toMatch(/^sts_outbox_oldest_unpublished_age_seconds\{schema="identity"\} 0$/m);

    const notification = await scrape('notification');
    expect(
      value(
        notification,
        /^sts_events_handled_total\{consumer="notification-email",event_type="invite\.created",outcome="ok"\}/,
      ),
    ).toBe(1);
    expect(notification).toMatch(/^sts_consumer_pending_messages\{consumer="notification-email"\} 0$/m);
    expect(notification).toMatch(/^sts_consumer_ack_pending_messages\{consumer="notification"\} \d+$/m);

    const analytics = await scrape('analytics');
    expect(value(analytics, /^sts_clickhouse_insert_rows_total\{table="telemetry_events"\}/)).toBe(40);
    expect(
      value(analytics, /^sts_clickhouse_insert_duration_seconds_count\{table="telemetry_events"\}/),
    ).toBeGreaterThan(0);
    expect(value(analytics, /^sts_consumer_redeliveries_total/)).toBe(0);

    // Only GET /metrics; the endpoint is not the API.
    expect((await fetch(`http://127.0.0.1:${metricsPorts.gateway}/api/session`)).status).toBe(404);
  });

  it("records nothing, in any process, of a request that the gateway's sampling leaves out", async () => {
    // A second gateway that samples no request; the services keep their default (every trace whose
    // root they see), so they record one only if the gateway's decision does not reach them.
    const port = await freePort();
    const unsampledGateway = start(
      'gateway',
      Object.assign({}, gatewayEnv, {
        PORT: String(port),
        METRICS_PORT: '',
        OTEL_TRACES_SAMPLER: 'always_off',
      }),
    );
    await unsampledGateway.waitUntil(`port ${port}`, () => portOpen(port));
    const invites = () => collector.spans.filter((span) => /createInvite|invite\.created/i.test(span.name));
    const seen = invites().length;
    const admin = await idp.issueUserToken({ email: 'admin@bundles.test', name: 'Admin' });
    const response = await fetch(`http://127.0.0.1:${port}/api/invites`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'untraced@bundles.test', role: 'ANALYST' }),
    });
    expect(response.status).toBe(201);
    await mail.waitFor((message) => message.envelope.to.includes('untraced@bundles.test'), 10_000);
    // Absence proven by sentinels, not by waiting. The unsampled gateway's shutdown sends its last spans,
    // so whatever it recorded has reached the collector once it has exited.
    await unsampledGateway.stop();
    // The same request through the sampling gateway is recorded in each of them (the gateway, identity
    // twice, notification). Each process exports its spans one batch at a time in the order they end,
    // and identity and notification (one event at a time) ended this request's spans after the first
    // one's: once its spans from both have arrived, any span of the first request would have too.
    const sampled = await api('POST', '/api/invites', admin, {
      email: 'traced-too@bundles.test',
      role: 'ANALYST',
    });
    expect(sampled.status).toBe(201);
    const later = await eventually(async () => {
      const spans = invites().slice(seen);
      const services = new Set(spans.map((span) => span.service));
      return spans.length >= 4 && services.has('identity') && services.has('notification') && spans;
    }, 10_000);
    // All of them of the sampled request's one trace: none of the unsampled request, in any process.
    expect(new Set(later.map((span) => span.traceId)).size).toBe(1);
  });

  it('serves no API docs with NODE_ENV=production and API_DOCS_ENABLED unset', async () => {
    for (const path of ['/docs', '/docs/', '/docs/json']) {
      const answer = await fetch(`${gatewayUrl}${path}`);
      expect([path, answer.status, answer.headers.get('content-type')]).toEqual([
        path,
        404,
        expect.stringContaining('application/problem+json'),
      ]);
    }
  });

  it("answers the containers' health check for every service and the gateway, and fails it for a dead port", async () => {
    const probe = (env: Record<string, string>) =>
      run(process.execPath, [bundle('healthcheck')], {
        cwd: ROOT,
        env: Object.assign({ PATH: process.env.PATH ?? '' }, env),
      }).then(
        () => 0,
        (error: { code?: number }) => error.code ?? -1,
      );
    for (const name of SERVICES) {
      expect([name, await probe(Object.assign({ GRPC_PORT: String(ports[name]) }, tlsEnv))]).toEqual([
        name,
        0,
      ]);
      // Without this container's certificate the service refuses the probe, as any client without one.
      expect([name, await probe({ GRPC_PORT: String(ports[name]) })]).toEqual([name, 1]);
    }
    expect(await probe({ PORT: String(ports.gateway) })).toBe(0);
    expect(await probe({ GRPC_PORT: String(await freePort()) })).toBe(1);
    expect(await probe({ PORT: String(await freePort()) })).toBe(1);
  });

  it('says it is ready, and names a service that went away without leaving the load balancer', async () => {
    const ready = await api<{ status: string; missing: string[] }>('GET', '/readyz');
    expect(ready).toEqual({
      status: 200,
      body: {
        status: 'ready',
        checks: {
          nats: 'ok',
          identity: 'ok',
          notification: 'ok',
          billing: 'ok',
          enrollment: 'ok',
          analytics: 'ok',
        },
        missing: [],
      },
    });
    await processes.find((service) => service.name === 'analytics')!.stop();
    // Still ready (the other routes work), and analytics is named.
    const degraded = await eventually(async () => {
      const answer = await api<{ status: string; missing: string[] }>('GET', '/readyz');
      return answer.body.status === 'degraded' ? answer : undefined;
    }, 5_000);
    expect(degraded).toMatchObject({ status: 200, body: { missing: ['analytics'] } });
    // Alive all the same: restarting the gateway would not bring analytics back.
    expect((await api('GET', '/livez')).status).toBe(200);
  });

  it('stops every service cleanly on SIGTERM', async () => {
    for (const service of [...processes].reverse()) await service.stop();
    expect(processes.map((service) => [service.name, service.status])).toEqual(
      processes.map((service) => [service.name, 'code 0']),
    );
  });
});
