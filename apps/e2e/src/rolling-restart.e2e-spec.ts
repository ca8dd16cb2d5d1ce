import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import { DevOidcProvider } from '@sts/dev-oidc/dev-oidc-provider';
import { Lifecycle } from '@sts/runtime/lifecycle';
import { testClickHouseDatabase } from '@sts/testing/clickhouse';
import { eventually } from '@sts/testing/eventually';
import { freePort } from '@sts/testing/free-port';
import { portOpen, ServiceProcess } from '@sts/testing/service-process';
import { startTcpBalancer, type TcpBalancer } from '@sts/testing/tcp-balancer';
import { testServiceAuth } from '@sts/testing/service-auth';
import type { ServiceName } from '@sts/vocabulary/services';
import { bundle, isolatedStores, requireBundles, ROOT } from './bundled-system';

const EVENTS_PER_BATCH = 5;
const WORKERS = 8;

interface Answer {
  status: number;
  body: string;
}

/**
 * A rolling restart under load, with the production bundles: two gateways behind a layer-4 balancer
 * (it polls /readyz and skips a replica that refuses a connection, nothing more), two enrollment and
 * two analytics replicas behind balancers of their own, and clients sending telemetry, enrolling devices
 * and reading pages all along. One replica of each is sent SIGTERM mid-load: no client sees an error,
 * each exits 0, and every telemetry batch accepted is stored once, without waiting for a redelivery.
 */
describe('rolling restart under load', () => {
  const lifecycle = new Lifecycle();
  const processes: ServiceProcess[] = [];
  const clickhouse = testClickHouseDatabase('restart');
  let gateways: ServiceProcess[];
  let enrollments: ServiceProcess[];
  let analytics: ServiceProcess[];
  let balancers: Record<'gateway' | 'enrollment' | 'analytics', TcpBalancer>;
  let ports: Record<string, number>;
  let agent: Agent;
  let idp: DevOidcProvider;

  beforeAll(async () => {
    requireBundles(['identity', 'enrollment', 'analytics', 'gateway']);
    const { database, natsUrl, namespace } = await isolatedStores(lifecycle, 'restart');
    lifecycle.add('clickhouse', () => clickhouse.drop());
    const audience = 'https://api.restart.test';
    // Plays a real provider: the production gateway refuses one that says it is the development one.
    idp = await DevOidcProvider.create({ audience, announceDevelopment: false });
    const issuer = await idp.start();
    lifecycle.add('identity provider', () => idp.stop());
    lifecycle.add('processes', () =>
      Promise.all(processes.map((service) => service.stop())).then(() => undefined),
    );
    lifecycle.add('balancers', () =>
      Promise.all(Object.values(balancers ?? {}).map((balancer) => balancer.close())).then(() => undefined),
    );

    const names = [
      'identity',
      'enrollment1',
      'enrollment2',
      'analytics1',
      'analytics2',
      'gateway1',
      'gateway2',
    ];
    ports = Object.fromEntries(
      await Promise.all(names.map(async (name) => [name, await freePort()] as const)),
    );
    // Every process its own signing key, as in production.
    const serviceAuth = testServiceAuth();
    const shared = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      NODE_ENV: 'production',
      // The identity provider is this process, over http on loopback.
      ALLOW_LOOPBACK_HTTP: 'true',
      LOG_LEVEL: 'warn',
      DATABASE_URL: database.url,
      NATS_URL: natsUrl,
      NATS_NAMESPACE: namespace,
      SERVICE_TRUSTED_KEYS: serviceAuth.SERVICE_TRUSTED_KEYS,
      SECRET_SEALING_KEY: randomBytes(32).toString('base64'),
      ENROLLMENT_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      CLICKHOUSE_URL: clickhouse.url,
      CLICKHOUSE_DATABASE: clickhouse.name,
      TELEMETRY_BATCH_WAIT_MS: '20',
      LAST_SEEN_FLUSH_MS: '200',
    };
    const start = async (name: string, app: string, env: Record<string, string>) => {
      const service = new ServiceProcess(
        name,
        ['--enable-source-maps', bundle(app)],
        { ...shared, ...serviceAuth.envOf(app as ServiceName), ...env },
        ROOT,
      );
      processes.push(service);
      const port = ports[name]!;
      await service.waitUntil(`port ${port}`, () => portOpen(port));
      return service;
    };
    const grpc = (name: string) => ({ GRPC_PORT: String(ports[name]) });
    // The first replica of each service migrates; the second finds the schema done.
    const [, enrollment1, analytics1] = await Promise.all([
      start('identity', 'identity', grpc('identity')),
      start('enrollment1', 'enrollment', grpc('enrollment1')),
      start('analytics1', 'analytics', grpc('analytics1')),
    ]);
    const [enrollment2, analytics2] = await Promise.all([
      start('enrollment2', 'enrollment', grpc('enrollment2')),
      start('analytics2', 'analytics', grpc('analytics2')),
    ]);
    enrollments = [enrollment1, enrollment2];
    analytics = [analytics1, analytics2];
    const enrollmentBalancer = await startTcpBalancer([ports.enrollment1!, ports.enrollment2!]);
    const analyticsBalancer = await startTcpBalancer([ports.analytics1!, ports.analytics2!]);
    const gatewayEnv = (name: string) => ({
      PORT: String(ports[name]),
      OIDC_ISSUER: issuer,
      OIDC_AUDIENCE: audience,
      IDENTITY_GRPC_ADDRESS: `127.0.0.1:${ports.identity}`,
      NOTIFICATION_GRPC_ADDRESS: `127.0.0.1:${ports.identity}`,
      BILLING_GRPC_ADDRESS: `127.0.0.1:${ports.identity}`,
      ENROLLMENT_GRPC_ADDRESS: `127.0.0.1:${enrollmentBalancer.port}`,
      ANALYTICS_GRPC_ADDRESS: `127.0.0.1:${analyticsBalancer.port}`,
      // Every request reaches the services: a cached answer would hide a failed call.
      DEVICE_CACHE_TTL_MS: '0',
      ANALYTICS_CACHE_TTL_MS: '0',
      ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '100000',
      SHUTDOWN_DRAIN_MS: '1500',
    });
    gateways = await Promise.all([
      start('gateway1', 'gateway', gatewayEnv('gateway1')),
      start('gateway2', 'gateway', gatewayEnv('gateway2')),
    ]);
    const gatewayBalancer = await startTcpBalancer([ports.gateway1!, ports.gateway2!], {
      healthCheck: async (port) => (await get(port, '/readyz')).status === 200,
      // deploy/k8s's probe, its period shortened: three failures in a row, each check given 3 s (a gateway
      // under load may take its dependencies' whole 1 s budget to answer; one slow answer is not a drain).
      healthIntervalMs: 100,
      failureThreshold: 3,
    });
    balancers = { gateway: gatewayBalancer, enrollment: enrollmentBalancer, analytics: analyticsBalancer };
    agent = new Agent({ keepAlive: true, maxSockets: WORKERS });
    lifecycle.add('http agent', () => agent.destroy());
  }, 90_000);

  afterAll(async () => {
    await lifecycle.close();
  });

  /** One request through the gateways' balancer; a connection error is thrown (the client saw it). */
  const call = (method: string, path: string, headers: Record<string, string>, body?: unknown) =>
    new Promise<Answer>((resolveCall, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const outgoing = request(
        {
          host: '127.0.0.1',
          port: balancers.gateway.port,
          method,
          path,
          agent,
          headers: payload ? { ...headers, 'content-type': 'application/json' } : headers,
          timeout: 10_000,
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () =>
            resolveCall({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
          );
          response.on('error', reject);
        },
      );
      outgoing.on('timeout', () => outgoing.destroy(new Error('client timeout')));
      outgoing.on('error', reject);
      outgoing.end(payload);
    });

  it('loses no request, call or event when a gateway and a replica of each service stop mid-load', async () => {
    const admin = await idp.issueUserToken({ email: 'admin@restart.test', name: 'Admin' });
    const auth = { authorization: `Bearer ${admin}` };
    const key = JSON.parse((await call('POST', '/api/enrollment-key', auth)).body) as { key: string };
    const codes: string[] = [];
    for (let round = 0; round < 4; round++) {
      const made = await call('POST', '/api/enrollment-codes', auth, { count: 100 });
      expect(made.status).toBe(200);
      codes.push(...(JSON.parse(made.body) as { codes: { code: string }[] }).codes.map(({ code }) => code));
    }
    let machines = 0;
    const enroll = () =>
      call(
        'POST',
        '/api/device/enroll',
        { 'x-enrollment-key': key.key },
        { code: codes.pop(), machine_id: `m-${++machines}`, hostname: `host-${machines}`, metadata: {} },
      );
    const devices: string[] = [];
    for (let n = 0; n < 4; n++) {
      const enrolled = await enroll();
      expect(enrolled.status).toBe(200);
      devices.push((JSON.parse(enrolled.body) as { device_token: string }).device_token);
    }

    let batches = 0;
    let acceptedEvents = 0;
    const sent: Record<string, number> = {};
    const failures: string[] = [];
    const operations: [name: string, expected: number, send: () => Promise<Answer>][] = [
      [
        'telemetry',
        202,
        () =>
          call(
            'POST',
            '/api/device/telemetry',
            { 'x-device-token': devices[batches % devices.length]! },
            {
              batch_id: `batch-${++batches}`,
              events: Array.from({ length: EVENTS_PER_BATCH }, (_, i) => ({
                observed_at: new Date(Date.now() - 60_000).toISOString(),
                url: `https://site-${i}.example/`,
                verdict: 'allowed',
                classification_ms: 5,
              })),
            },
          ),
      ],
      ['enroll', 200, enroll],
      ['summary', 200, () => call('GET', '/api/analytics/summary?window=24h', auth)],
      ['devices', 200, () => call('GET', '/api/devices?limit=5', auth)],
    ];
    let running = true;
    const worker = async (index: number) => {
      for (let n = index; running; n++) {
        const [name, expected, send] = operations[n % operations.length]!;
        if (name === 'enroll' && codes.length === 0) continue;
        sent[name] = (sent[name] ?? 0) + 1;
        try {
          const answer = await send();
          if (answer.status !== expected)
            failures.push(`${name}: ${answer.status} ${answer.body.slice(0, 200)}`);
          else if (name === 'telemetry') acceptedEvents += EVENTS_PER_BATCH;
        } catch (error) {
          failures.push(`${name}: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    };
    const load = Promise.all(Array.from({ length: WORKERS }, (_, index) => worker(index)));

    // Every kind of load under way (five of each sent) before anything stops.
    const eachSentSince = (since: Record<string, number>, count: number) =>
      eventually(() => operations.every(([name]) => (sent[name] ?? 0) - (since[name] ?? 0) >= count), 30_000);
    await eachSentSince({}, 5);
    const sentBefore = { ...sent };
    // The replicas that carry the gateways' gRPC connections now get SIGTERM. They stay in their balancers'
    // rotation (as when a Service's endpoints lag behind), so new connections to them are refused there.
    const busiest = (balancer: TcpBalancer, replicas: ServiceProcess[], names: string[]) => {
      const counts = balancer.connections();
      const index = names
        .map((name) => counts.get(ports[name]!) ?? 0)
        .reduce((best, count, i, all) => (count > all[best]! ? i : best), 0);
      expect(counts.get(ports[names[index]!]!)).toBeGreaterThan(0);
      return replicas[index]!;
    };
    const stopping = [
      gateways[0]!,
      busiest(balancers.enrollment, enrollments, ['enrollment1', 'enrollment2']),
      busiest(balancers.analytics, analytics, ['analytics1', 'analytics2']),
    ];
    const stoppedAt = Date.now();
    await Promise.all(stopping.map((service) => service.stop(15_000)));
    const stopMs = Date.now() - stoppedAt;
    // And goes on through the replicas left: five more of each after the stops.
    await eachSentSince({ ...sent }, 5);
    running = false;
    await load;

    expect(failures).toEqual([]);
    // A replica that had to be killed shows its last lines (which shutdown step held it).
    expect(
      stopping.map((service) => [service.name, service.status === 'code 0' ? 'code 0' : service.tail()]),
    ).toEqual(stopping.map((service) => [service.name, 'code 0']));
    // Load of every kind went on while they drained.
    for (const [name] of operations)
      expect([name, sent[name]! - sentBefore[name]! > 5]).toEqual([name, true]);
    // The draining gateway said so to the balancer's readiness checks before it stopped listening.
    expect(balancers.gateway.everUnhealthy()).toEqual(new Set([ports.gateway1]));
    expect(stopMs).toBeLessThan(10_000);

    // Every accepted batch is stored once, well before a batch held by a stopped replica would be
    // redelivered (60 s): nothing was left unacknowledged in a process that went away.
    const stored = async () => {
      const result = await clickhouse.client.query({
        query: 'SELECT count() AS n FROM telemetry_events',
        format: 'JSONEachRow',
      });
      return Number((await result.json<{ n: string }>())[0]!.n);
    };
    await eventually(async () => (await stored()) >= acceptedEvents, 15_000).catch(() => undefined);
    expect(await stored()).toBe(acceptedEvents);
  }, 90_000);
});

/** GET on a fresh connection, for the balancer's readiness checks. */
function get(port: number, path: string): Promise<Answer> {
  return new Promise((resolveGet, reject) => {
    const outgoing = request({ host: '127.0.0.1', port, path, agent: false, timeout: 3_000 }, (response) => {
      response.resume();
      response.on('end', () => resolveGet({ status: response.statusCode ?? 0, body: '' }));
    });
    outgoing.on('timeout', () => outgoing.destroy(new Error('timeout')));
    outgoing.on('error', reject);
    outgoing.end();
  });
}
