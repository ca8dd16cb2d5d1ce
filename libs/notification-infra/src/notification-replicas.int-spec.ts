import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { loadConfig } from '@sts/config/load-config';
import { sealSecret } from '@sts/crypto/secrets';
import { SEALING_CONTEXTS } from '@sts/events/event-catalogue';
import { newEnvelope } from '@sts/events/event-envelope';
import { eventsStreamName } from '@sts/events/subjects';
import { createLogger } from '@sts/logger/create-logger';
import { createPromiseClient } from '@sts/grpc/grpc-client';
import { createEventPublisher } from '@sts/nats/event-publisher';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { NotificationServiceService } from '@sts/proto/gen/notification/v1/notification';
import { consumerCaughtUp } from '@sts/testing/consumer-progress';
import { eventually } from '@sts/testing/eventually';
import {
  startHttpsReceiver,
  testCertificateAuthority,
  type HttpsReceiver,
} from '@sts/stand-ins/https-receiver';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { testServiceAuth } from '@sts/testing/service-auth';
import { startSmtpSink, type SmtpSink } from '@sts/stand-ins/smtp-sink';
import { notificationEnvSchema } from './notification-config';
import {
  NOTIFICATION_EMAIL_CONSUMER,
  startNotificationService,
  type RunningService,
} from './start-notification-service';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const FEED_EVENTS = 300;
const INVITES = 20;
const ALERTS = 20;

/**
 * Two replicas of the notifier share their durable consumers (the feed's and the e-mails') and the
 * schedule of alert deliveries: every event has its effect once, whichever replica takes it, also when
 * each is delivered twice, and every alert reaches each endpoint once.
 */
describe('notification replicas (PostgreSQL, NATS, SMTP)', () => {
  const logger = createLogger('notification-replicas', 'silent');
  const namespace = uniqueNatsNamespace('notrep');
  const sealingKey = randomBytes(32);
  const serviceAuth = testServiceAuth();
  let database: TestDatabase;
  let sink: SmtpSink;
  let receiver: HttpsReceiver;
  let caDir: string;
  let nats: JetStreamConnection;
  const replicas: RunningService[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('notification_replicas');
    sink = await startSmtpSink();
    const ca = await testCertificateAuthority();
    receiver = await startHttpsReceiver(ca);
    caDir = await mkdtemp(join(tmpdir(), 'sts-replicas-ca-'));
    await writeFile(join(caDir, 'ca.pem'), ca.certPem);
    const config = loadConfig(notificationEnvSchema, {
      DATABASE_URL: database.url,
      NATS_URL,
      NATS_NAMESPACE: namespace,
      GRPC_PORT: '0',
      ...serviceAuth.envOf('notification'),
      SMTP_URL: sink.url,
      SECRET_SEALING_KEY: sealingKey.toString('base64'),
      LOG_LEVEL: 'silent',
      // The alert receiver runs on this machine.
      ALERT_ALLOW_PRIVATE_NETWORKS: 'true',
      ALERT_EXTRA_CA_FILE: join(caDir, 'ca.pem'),
    });
    // One after the other: the first migrates (the second would wait on the migration lock anyway).
    replicas.push(await startNotificationService(config, logger));
    replicas.push(await startNotificationService(config, logger));
    nats = await connectJetStream({ url: NATS_URL, name: 'notification-replicas-test', logger });
  });

  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop()));
    if (nats) {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
    await sink?.close();
    await receiver?.close();
    await database?.drop();
    if (caDir) await rm(caDir, { recursive: true, force: true });
  });

  it('writes each feed item once and sends each e-mail once, with both replicas consuming', async () => {
    const publish = createEventPublisher(nats.js, namespace);
    const feedEvents = Array.from({ length: FEED_EVENTS }, (_, n) =>
      newEnvelope('member.joined', {
        org_id: `org-${n % 5}`,
        member_id: `m-${n}`,
        user_id: `u-${n}`,
        email: `member${n}@example.com`,
        name: `Member ${n}`,
        role: 'ANALYST',
        joined_at: new Date().toISOString(),
      }),
    );
    const invites = Array.from({ length: INVITES }, (_, n) => {
      const data = { org_id: 'org-i', email: `invitee${n}@example.com`, invite_id: `inv-${n}` };
      return newEnvelope('invite.created', {
        org_id: data.org_id,
        org_name: 'Acme',
        invite_id: data.invite_id,
        email: data.email,
        role: 'APP_USER' as const,
        invited_by_name: 'Ada',
        expires_at: new Date(Date.now() + 86_400_000).toISOString(),
        token_sealed: sealSecret(`sts_inv_${n}`, sealingKey, SEALING_CONTEXTS.inviteToken(data)),
      });
    });
    const all = [...feedEvents, ...invites];
    await Promise.all(all.map((event) => publish(event)));
    // Each again without a message id (the stream keeps the copy): a redelivery the ledgers must absorb.
    await Promise.all(
      all.map((event) => nats.js.publish(`${namespace}.events.${event.type}`, JSON.stringify(event))),
    );

    const db = new Client({ connectionString: database.url });
    await db.connect();
    try {
      const count = async (sql: string) => Number((await db.query<{ n: string }>(sql)).rows[0]!.n);
      await eventually(
        async () =>
          (await count('select count(*) as n from notification.feed_items')) === FEED_EVENTS &&
          sink.messages.length >= INVITES,
        30_000,
      );
      // Both consumers have acknowledged every message, copies included (each after its effect
      // committed and its mail was sent): any double effect has shown by now.
      await eventually(async () => {
        const caughtUp = await Promise.all(
          ['notification', NOTIFICATION_EMAIL_CONSUMER].map((consumer) =>
            consumerCaughtUp(nats.jsm, eventsStreamName(namespace), consumer),
          ),
        );
        return caughtUp.every(Boolean);
      }, 30_000);
      expect(await count('select count(*) as n from notification.feed_items')).toBe(FEED_EVENTS);
      expect(await count('select count(distinct id) as n from notification.feed_items')).toBe(FEED_EVENTS);
      expect(sink.messages.map((mail) => mail.envelope.to.join(',')).sort()).toEqual(
        invites.map((invite) => invite.data.email).sort(),
      );
      expect(await count(`select count(*) as n from notification.email_log`)).toBe(INVITES);
    } finally {
      await db.end();
    }
  });

  it('schedules each threat alert once per endpoint and delivers it once, with both replicas consuming and sending', async () => {
    const clients = replicas.map((replica) =>
      createPromiseClient(
        NotificationServiceService,
        `127.0.0.1:${replica.grpcPort}`,
        5_000,
        serviceAuth.as('notification'),
      ),
    );
    try {
      const orgs = [`org-${randomUUID()}`, `org-${randomUUID()}`];
      const endpoints = [
        { orgId: orgs[0]!, path: '/a1' },
        { orgId: orgs[0]!, path: '/a2' },
        { orgId: orgs[1]!, path: '/b1' },
      ];
      for (const [n, endpoint] of endpoints.entries()) {
        await clients[n % 2]!.createAlertEndpoint({
          orgId: endpoint.orgId,
          url: `${receiver.url}${endpoint.path}`,
          description: '',
        });
      }
      const threats = Array.from({ length: ALERTS }, (_, n) =>
        newEnvelope('threat.detected', {
          org_id: orgs[n % 2]!,
          device_id: randomUUID(),
          hostname: `kiosk-${n}`,
          dangerous_blocks: 6,
          window_minutes: 10,
          detected_at: new Date().toISOString(),
        }),
      );
      const publish = createEventPublisher(nats.js, namespace);
      await Promise.all(
        threats.map(async (event) => {
          await publish(event);
          await nats.js.publish(`${namespace}.events.${event.type}`, JSON.stringify(event));
        }),
      );

      // Each alert of an organization, at each of its endpoints.
      const expected = endpoints
        .flatMap(({ orgId, path }) =>
          threats
            .filter((event) => event.data.org_id === orgId)
            .map((event) => `${path} ${event.data.device_id}`),
        )
        .sort();
      const received = () =>
        receiver.requests
          .filter((request) => endpoints.some(({ path }) => path === request.path))
          .map((request) => {
            const body = JSON.parse(request.body) as { data: { device_id: string } };
            return `${request.path} ${body.data.device_id}`;
          })
          .sort();
      await eventually(() => received().length >= expected.length, 20_000);
      // Any second delivery has shown once the feed's consumer acknowledged every copy (what it
      // scheduled is committed), nothing is pending, and both replicas stopped (each waits for its
      // attempts in flight).
      await eventually(() => consumerCaughtUp(nats.jsm, eventsStreamName(namespace), 'notification'), 20_000);
      const db = new Client({ connectionString: database.url });
      await db.connect();
      try {
        await eventually(
          async () =>
            (await db.query("select 1 from notification.alert_deliveries where status = 'pending' limit 1"))
              .rowCount === 0,
          20_000,
        );
      } finally {
        await db.end();
      }
      for (const replica of replicas) await replica.stop();
      expect(received()).toEqual(expected);
      const deliveryIds = receiver.requests.map((request) => request.headers['webhook-id']);
      expect(new Set(deliveryIds).size).toBe(deliveryIds.length);
    } finally {
      clients.forEach((client) => client.close());
    }
  });
});
