import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { Webhook } from 'standardwebhooks';
import { loadConfig } from '@sts/config/load-config';
import { AppError } from '@sts/errors/app-error';
import type { DomainEvent } from '@sts/events/event-catalogue';
import { newEnvelope } from '@sts/events/event-envelope';
import { eventsStreamName } from '@sts/events/subjects';
import { createPromiseClient } from '@sts/grpc/grpc-client';
import { createLogger } from '@sts/logger/create-logger';
import { createEventPublisher, type EventPublisher } from '@sts/nats/event-publisher';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { NotificationServiceService } from '@sts/proto/gen/notification/v1/notification';
import { consumerCaughtUp } from '@sts/testing/consumer-progress';
import { eventually } from '@sts/testing/eventually';
import {
  startHttpsReceiver,
  testCertificateAuthority,
  type HttpsReceiver,
  type ReceivedRequest,
} from '@sts/stand-ins/https-receiver';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { testServiceAuth } from '@sts/testing/service-auth';
import { startSmtpSink, type SmtpSink } from '@sts/stand-ins/smtp-sink';
import { notificationEnvSchema } from './notification-config';
import { startNotificationService, type RunningService } from './start-notification-service';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

const threatDetected = (orgId: string, hostname = 'kiosk-7'): DomainEvent<'threat.detected'> =>
  newEnvelope('threat.detected', {
    org_id: orgId,
    device_id: randomUUID(),
    hostname,
    dangerous_blocks: 6,
    window_minutes: 10,
    detected_at: new Date().toISOString(),
  });

/** Alert deliveries through the notification service: PostgreSQL schedule, NATS events, HTTPS receivers. */
describe('alert deliveries (PostgreSQL, NATS, HTTPS receivers)', () => {
  const serviceAuth = testServiceAuth();
  const logger = createLogger('alerts-int', 'silent');
  const namespace = uniqueNatsNamespace('alerts');
  let database: TestDatabase;
  let sink: SmtpSink;
  let receiver: HttpsReceiver;
  let caDir: string;
  let services: RunningService[] = [];
  let nats: JetStreamConnection;
  let publish: EventPublisher;
  let db: Client;
  let configEnv: Record<string, string>;

  const start = async () => {
    const service = await startNotificationService(loadConfig(notificationEnvSchema, configEnv), logger);
    services.push(service);
    return service;
  };
  const clientOf = (service: RunningService) =>
    createPromiseClient(
      NotificationServiceService,
      `127.0.0.1:${service.grpcPort}`,
      5_000,
      serviceAuth.as('notification'),
    );
  let client: ReturnType<typeof clientOf>;

  /** Requests that reached the receiver under one path. */
  const at = (path: string) => receiver.requests.filter((request) => request.path === path);
  const verify = (secret: string, request: ReceivedRequest) =>
    new Webhook(secret).verify(request.body, {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    });
  /** Time passes: the delivery's next attempt is due now. */
  const dueNow = (deliveryId: string) =>
    db.query('update notification.alert_deliveries set next_attempt_at = now() where id = $1', [deliveryId]);
  /** Until no delivery of the endpoint is pending: each scheduled one has been attempted and recorded. */
  const settledAt = (endpointId: string) =>
    eventually(
      async () =>
        (
          await db.query(
            "select 1 from notification.alert_deliveries where endpoint_id = $1 and status = 'pending'",
            [endpointId],
          )
        ).rowCount === 0,
    );

  beforeAll(async () => {
    database = await createTestDatabase('alerts');
    sink = await startSmtpSink();
    const ca = await testCertificateAuthority();
    receiver = await startHttpsReceiver(ca);
    caDir = await mkdtemp(join(tmpdir(), 'sts-alert-ca-'));
    await writeFile(join(caDir, 'ca.pem'), ca.certPem);
    configEnv = {
      DATABASE_URL: database.url,
      NATS_URL,
      NATS_NAMESPACE: namespace,
      GRPC_PORT: '0',
      ...serviceAuth.envOf('notification'),
      SMTP_URL: sink.url,
      SECRET_SEALING_KEY: randomBytes(32).toString('base64'),
      PUBLIC_APP_URL: 'https://app.test',
      LOG_LEVEL: 'silent',
      // The receivers run on this machine.
      ALERT_ALLOW_PRIVATE_NETWORKS: 'true',
      ALERT_EXTRA_CA_FILE: join(caDir, 'ca.pem'),
      ALERT_ATTEMPT_TIMEOUT_MS: '1000',
    };
    client = clientOf(await start());
    nats = await connectJetStream({ url: NATS_URL, name: 'alerts-int-test', logger });
    publish = createEventPublisher(nats.js, namespace);
    db = new Client({ connectionString: database.url });
    await db.connect();
  });

  afterAll(async () => {
    client?.close();
    await db?.end();
    await Promise.all(services.map((service) => service.stop()));
    if (nats) {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
    await receiver?.close();
    await sink?.close();
    await database?.drop();
    if (caDir) await rm(caDir, { recursive: true, force: true });
  });

  it('delivers a threat detection to every endpoint of its organization, signed so that the reference library verifies it', async () => {
    const orgA = `org-${randomUUID()}`;
    const orgB = `org-${randomUUID()}`;
    const first = await client.createAlertEndpoint({
      orgId: orgA,
      url: `${receiver.url}/a1`,
      description: 'SIEM',
    });
    const second = await client.createAlertEndpoint({
      orgId: orgA,
      url: `${receiver.url}/a2`,
      description: '',
    });
    await client.createAlertEndpoint({ orgId: orgB, url: `${receiver.url}/b`, description: '' });
    expect(first.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);

    const event = threatDetected(orgA);
    await publish(event);
    const [toFirst] = await eventually(() => (at('/a1').length > 0 ? at('/a1') : undefined));
    await eventually(() => at('/a2').length > 0 || undefined);

    const payload = verify(first.secret, toFirst!) as {
      id: string;
      type: string;
      data: Record<string, unknown>;
    };
    expect(payload).toEqual({
      id: event.id,
      type: 'alert.threat_detected',
      created_at: event.data.detected_at,
      data: {
        org_id: orgA,
        device_id: event.data.device_id,
        hostname: 'kiosk-7',
        dangerous_blocks: 6,
        window_minutes: 10,
        detected_at: event.data.detected_at,
        dashboard_url: `https://app.test/devices/${event.data.device_id}`,
      },
    });
    // Each endpoint's own secret: the other's does not verify it.
    expect(() => verify(second.secret, toFirst!)).toThrow();
    expect(verify(second.secret, at('/a2')[0]!)).toMatchObject({ id: event.id });
    expect(at('/b')).toHaveLength(0);

    const [logged] = (
      await client.listAlertDeliveries({ orgId: orgA, endpointId: first.endpoint!.id, limit: 0 })
    ).deliveries;
    expect(logged).toMatchObject({
      id: toFirst!.headers['webhook-id'],
      status: 'delivered',
      attempts: 1,
      lastResponseCode: 200,
    });
    // The same event again (a redelivery): nothing more is scheduled or sent. Proved once the feed's
    // consumer has acknowledged the copy (what it scheduled is committed by then) and nothing is pending.
    const copy = await nats.js.publish(`${namespace}.events.threat.detected`, JSON.stringify(event));
    await eventually(() => consumerCaughtUp(nats.jsm, eventsStreamName(namespace), 'notification', copy.seq));
    await settledAt(first.endpoint!.id);
    expect(
      (await client.listAlertDeliveries({ orgId: orgA, endpointId: first.endpoint!.id, limit: 0 }))
        .deliveries,
    ).toHaveLength(1);
    expect(at('/a1')).toHaveLength(1);
  });

  it('tries again after a 500 with the same webhook-id, also after the service restarted, and stops at a 410', async () => {
    const orgId = `org-${randomUUID()}`;
    receiver.behave((request) =>
      request.path === '/gone'
        ? { status: 410 }
        : at('/flaky').length === 1
          ? { status: 500 }
          : { status: 200 },
    );
    const flaky = await client.createAlertEndpoint({ orgId, url: `${receiver.url}/flaky`, description: '' });
    const gone = await client.createAlertEndpoint({ orgId, url: `${receiver.url}/gone`, description: '' });

    const { delivery } = await client.sendTestAlert({ orgId, endpointId: flaky.endpoint!.id });
    const failed = await eventually(async () => {
      const [row] = (await client.listAlertDeliveries({ orgId, endpointId: flaky.endpoint!.id, limit: 0 }))
        .deliveries;
      return row?.attempts === 1 ? row : undefined;
    });
    expect(failed).toMatchObject({ status: 'pending', lastResponseCode: 500, lastError: 'HTTP 500' });
    // The next attempt follows the schedule (5 s, with jitter).
    const waitMs = failed.nextAttemptAt!.getTime() - failed.lastAttemptAt!.getTime();
    expect(waitMs).toBeGreaterThanOrEqual(4_000);
    expect(waitMs).toBeLessThanOrEqual(6_000);

    // The service goes away between the attempts; a new process finds the schedule in PostgreSQL.
    await services[0]!.stop();
    services = services.slice(1);
    client.close();
    client = clientOf(await start());
    await dueNow(delivery!.id);
    await eventually(() => at('/flaky').length === 2 || undefined);
    const [firstTry, secondTry] = at('/flaky');
    expect(secondTry!.headers['webhook-id']).toBe(firstTry!.headers['webhook-id']);
    expect(secondTry!.headers['webhook-id']).toBe(delivery!.id);
    expect(verify(flaky.secret, secondTry!)).toMatchObject({ type: 'alert.test' });
    await eventually(async () => {
      const [row] = (await client.listAlertDeliveries({ orgId, endpointId: flaky.endpoint!.id, limit: 0 }))
        .deliveries;
      return row?.status === 'delivered' || undefined;
    });

    const refused = await client.sendTestAlert({ orgId, endpointId: gone.endpoint!.id });
    const stopped = await eventually(async () => {
      const [row] = (await client.listAlertDeliveries({ orgId, endpointId: gone.endpoint!.id, limit: 0 }))
        .deliveries;
      return row?.status === 'failed' ? row : undefined;
    });
    expect(stopped).toMatchObject({ id: refused.delivery!.id, attempts: 1, lastResponseCode: 410 });
    expect(stopped.nextAttemptAt).toBeUndefined();
    receiver.behave(() => ({ status: 200 }));
  });

  it('sends each message once with two processes claiming from one schedule', async () => {
    const orgId = `org-${randomUUID()}`;
    await start();
    const { endpoint } = await client.createAlertEndpoint({
      orgId,
      url: `${receiver.url}/pair`,
      description: '',
    });
    // Thirty messages due at once (more than an endpoint's test allowance, so written here).
    const { rows } = await db.query<{ id: string }>(
      `insert into notification.alert_deliveries
         (id, org_id, endpoint_id, event_type, body, status, attempts, next_attempt_at, created_at)
       select gen_random_uuid(), $1, $2, 'alert.test', '{}', 'pending', 0, now(), now()
       from generate_series(1, 30)
       returning id`,
      [orgId, endpoint!.id],
    );
    await eventually(() => at('/pair').length >= 30 || undefined);
    await settledAt(endpoint!.id);
    // Both processes stopped (each waits for its attempts in flight): every request they made has arrived.
    client.close();
    for (const service of services.splice(0)) await service.stop();
    const ids = at('/pair').map((request) => request.headers['webhook-id']);
    expect(ids).toHaveLength(30);
    expect(new Set(ids)).toEqual(new Set(rows.map(({ id }) => id)));
    // Two processes again for what follows.
    client = clientOf(await start());
    await start();
  });

  it('allows an endpoint three test messages a minute, counted across processes, then RATE_LIMITED', async () => {
    const orgId = `org-${randomUUID()}`;
    const clients = [client, clientOf(services.at(-1)!)];
    try {
      const { endpoint } = await client.createAlertEndpoint({
        orgId,
        url: `${receiver.url}/tests`,
        description: '',
      });
      const { endpoint: other } = await client.createAlertEndpoint({
        orgId,
        url: `${receiver.url}/tests-other`,
        description: '',
      });
      const outcomes = await Promise.all(
        Array.from({ length: 5 }, (_, i) =>
          clients[i % 2]!.sendTestAlert({ orgId, endpointId: endpoint!.id }).then(
            () => 'sent',
            (error: unknown) => (error instanceof AppError ? error.code : String(error)),
          ),
        ),
      );
      expect(outcomes.filter((outcome) => outcome === 'sent')).toHaveLength(3);
      expect(outcomes.filter((outcome) => outcome === 'RATE_LIMITED')).toHaveLength(2);
      expect(
        (await client.listAlertDeliveries({ orgId, endpointId: endpoint!.id, limit: 0 })).deliveries,
      ).toHaveLength(3);
      // Another endpoint's allowance is its own.
      await client.sendTestAlert({ orgId, endpointId: other!.id });
    } finally {
      clients[1]!.close();
    }
  });

  it("attempts a delivery claimed by a process that died once that process's lease has run out", async () => {
    const orgId = `org-${randomUUID()}`;
    const { endpoint } = await client.createAlertEndpoint({
      orgId,
      url: `${receiver.url}/orphan`,
      description: '',
    });
    const id = randomUUID();
    // As a worker leaves it when it dies mid-attempt: claimed, leased for 4 more seconds, not recorded.
    await db.query(
      `insert into notification.alert_deliveries
         (id, org_id, endpoint_id, event_type, body, status, attempts, next_attempt_at, locked_until, created_at)
       values ($1, $2, $3, 'alert.test', $4, 'pending', 0, now(), now() + interval '4 seconds', now())`,
      [
        id,
        orgId,
        endpoint!.id,
        JSON.stringify({ id, type: 'alert.test', created_at: new Date().toISOString(), data: {} }),
      ],
    );
    // While the lease holds, a worker's pass that takes a later delivery leaves this one alone: a test
    // message to another endpoint, scheduled after it, is delivered while it is still unclaimed.
    const { endpoint: later } = await client.createAlertEndpoint({
      orgId,
      url: `${receiver.url}/orphan-later`,
      description: '',
    });
    await client.sendTestAlert({ orgId, endpointId: later!.id });
    await eventually(() => at('/orphan-later').length === 1 || undefined);
    await settledAt(later!.id);
    const { rows } = await db.query(
      `select attempts, lease_token, locked_until > now() as leased
       from notification.alert_deliveries where id = $1`,
      [id],
    );
    expect(rows).toEqual([{ attempts: 0, lease_token: null, leased: true }]);
    expect(at('/orphan')).toHaveLength(0);
    await eventually(() => at('/orphan').length === 1 || undefined, 10_000);
    expect(at('/orphan')[0]!.headers['webhook-id']).toBe(id);
  });

  it('disables an endpoint that has failed for days, tells the organization in its feed, and sends again once enabled', async () => {
    const orgId = `org-${randomUUID()}`;
    // The URL carries a secret, as receivers' URLs often do; the feed is read by every member.
    const dying = '/dying?token=s3cr3t';
    receiver.behave((request) => (request.path === dying ? { status: 503 } : { status: 200 }));
    const { endpoint } = await client.createAlertEndpoint({
      orgId,
      url: `${receiver.url}${dying}`,
      description: '',
    });
    // Its deliveries have been failing for six days (the default limit is five).
    await db.query(
      `update notification.alert_endpoints set failing_since = now() - interval '6 days' where id = $1`,
      [endpoint!.id],
    );
    await client.sendTestAlert({ orgId, endpointId: endpoint!.id });
    const disabled = await eventually(async () => {
      const [listed] = (await client.listAlertEndpoints({ orgId })).endpoints;
      return listed?.disabledAt ? listed : undefined;
    });
    expect(disabled.id).toBe(endpoint!.id);
    const feed = await client.listNotifications({
      orgId,
      userId: 'admin',
      limit: 0,
      cursor: '',
      unreadOnly: false,
    });
    expect(feed.notifications).toEqual([
      expect.objectContaining({
        type: 'alert_endpoint.disabled',
        message: expect.stringContaining(`${endpoint!.id} (localhost:${receiver.port})`),
      }),
    ]);
    expect(feed.notifications[0]!.message).not.toMatch(/dying|token|s3cr3t/);
    const [failed] = (await client.listAlertDeliveries({ orgId, endpointId: endpoint!.id, limit: 0 }))
      .deliveries;
    expect(failed).toMatchObject({ status: 'failed', attempts: 1, lastResponseCode: 503 });

    // While disabled, alerts are not sent to it. The same alert goes to an enabled endpoint of the
    // organization, scheduled in the same transaction: once that one is delivered, a worker's pass has
    // seen whatever was scheduled for the disabled one, and left it unclaimed.
    const { endpoint: enabledOne } = await client.createAlertEndpoint({
      orgId,
      url: `${receiver.url}/alive`,
      description: '',
    });
    const attemptsBefore = at(dying).length;
    await publish(threatDetected(orgId));
    await eventually(
      async () =>
        (await client.listNotifications({ orgId, userId: 'admin', limit: 0, cursor: '', unreadOnly: false }))
          .notifications.length === 2 || undefined,
    );
    await eventually(() => at('/alive').length === 1 || undefined);
    await settledAt(enabledOne!.id);
    const { rows: claimedWhileDisabled } = await db.query(
      `select id from notification.alert_deliveries
       where endpoint_id = $1 and id <> $2 and (attempts > 0 or lease_token is not null)`,
      [endpoint!.id, failed!.id],
    );
    expect(claimedWhileDisabled).toEqual([]);
    expect(at(dying)).toHaveLength(attemptsBefore);

    receiver.behave(() => ({ status: 200 }));
    const enabled = await client.enableAlertEndpoint({ orgId, endpointId: endpoint!.id });
    expect(enabled.endpoint?.disabledAt).toBeUndefined();
    await publish(threatDetected(orgId));
    await eventually(() => at(dying).length === attemptsBefore + 1 || undefined);
  });

  it('keeps finished deliveries 30 days: older ones are deleted, pending ones never', async () => {
    const orgId = `org-${randomUUID()}`;
    const { endpoint } = await client.createAlertEndpoint({
      orgId,
      url: `${receiver.url}/history`,
      description: '',
    });
    const insert = (status: string, createdDaysAgo: number, attemptedDaysAgo: number | null) =>
      db
        .query<{ id: string }>(
          `insert into notification.alert_deliveries
             (id, org_id, endpoint_id, event_type, body, status, attempts, next_attempt_at, created_at,
              last_attempt_at)
           values (gen_random_uuid(), $1, $2, 'alert.test', '{}', $3, $4,
                   case when $3 = 'pending' then now() + interval '1 hour' end,
                   now() - make_interval(days => $5),
                   now() - make_interval(days => $6::int))
           returning id`,
          [orgId, endpoint!.id, status, attemptedDaysAgo === null ? 0 : 1, createdDaysAgo, attemptedDaysAgo],
        )
        .then(({ rows }) => rows[0]!.id);
    const expired = [
      await insert('delivered', 32, 31),
      // Failed without an attempt (its endpoint was disabled first): its creation counts.
      await insert('failed', 31, null),
    ];
    const kept = [
      await insert('failed', 31, 29),
      // Pending however old (a schedule stalled for weeks still sends it).
      await insert('pending', 40, 40),
    ];
    const remaining = async () =>
      (
        await db.query<{ id: string }>(
          'select id from notification.alert_deliveries where endpoint_id = $1',
          [endpoint!.id],
        )
      ).rows.map(({ id }) => id);
    expect(new Set(await remaining())).toEqual(new Set([...expired, ...kept]));

    // A process deletes expired rows when it starts (then hourly), all of them in one statement.
    await start();
    await eventually(async () => !(await remaining()).some((id) => expired.includes(id)));
    expect(new Set(await remaining())).toEqual(new Set(kept));
  });

  it('delivers a message whose process was killed (SIGKILL) in the middle of its attempt, once per attempt', async () => {
    const orgId = `org-${randomUUID()}`;
    const { endpoint } = await client.createAlertEndpoint({
      orgId,
      url: `${receiver.url}/crash`,
      description: '',
    });
    // Only the child process works the schedule: it takes the delivery and dies mid-attempt.
    for (const service of services.splice(0)) await service.stop();
    client.close();
    const id = randomUUID();
    await db.query(
      `insert into notification.alert_deliveries
         (id, org_id, endpoint_id, event_type, body, status, attempts, next_attempt_at, created_at)
       values ($1, $2, $3, 'alert.test', $4, 'pending', 0, now(), now())`,
      [
        id,
        orgId,
        endpoint!.id,
        JSON.stringify({ id, type: 'alert.test', created_at: new Date().toISOString(), data: {} }),
      ],
    );
    const child = spawn(process.execPath, ['--import', 'tsx', 'apps/notification/src/main.ts'], {
      cwd: resolve(__dirname, '../../..'),
      env: { ...process.env, ...configEnv, NODE_ENV: 'test' },
      stdio: 'ignore',
    });
    receiver.behave((request) => {
      if (request.path !== '/crash') return { status: 200 };
      if (at('/crash').length > 1) return { status: 200 };
      child.kill('SIGKILL'); // while the attempt waits for its answer
      return 'never-answer';
    });
    const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
    expect({ code, signal }).toEqual({ code: null, signal: 'SIGKILL' });
    expect(at('/crash')).toHaveLength(1);

    // A new process takes it once the dead one's lease (three attempt timeouts) has run out.
    client = clientOf(await start());
    await eventually(() => at('/crash').length === 2 || undefined, 10_000);
    const [first, second] = at('/crash');
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    const [row] = (await client.listAlertDeliveries({ orgId, endpointId: endpoint!.id, limit: 0 }))
      .deliveries;
    expect(row).toMatchObject({ id, status: 'delivered' });
    // The process stopped (it waits for its attempts in flight): every request it made has arrived.
    for (const service of services.splice(0)) await service.stop();
    expect(at('/crash')).toHaveLength(2);
    receiver.behave(() => ({ status: 200 }));
  }, 30_000);
});
