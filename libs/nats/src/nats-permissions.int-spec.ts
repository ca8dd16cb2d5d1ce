import { randomBytes } from 'node:crypto';
import { AckPolicy, RetentionPolicy } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { newEnvelope } from '@sts/events/event-envelope';
import { eventsStreamName } from '@sts/events/subjects';
import {
  telemetryClaimsBucketName,
  telemetryStreamName,
  telemetrySubject,
  TELEMETRY_HEADERS,
} from '@sts/events/telemetry';
import { createLogger } from '@sts/logger/create-logger';
import { eventually } from '@sts/testing/eventually';
import { startNatsServer, type LocalNatsServer } from '@sts/testing/nats-server';
import { SERVICE_NAMES, type ServiceName } from '@sts/vocabulary/services';
import { startBatchConsumer } from './batch-consumer';
import { ensureDurableConsumer } from './durable-consumer';
import { createEventPublisher } from './event-publisher';
import { ensureEventsStream } from './event-stream';
import { connectJetStream, type JetStreamConnection } from './jetstream-connection';
import { limitsBucketName, openKvBucket, openLimitsBucket, telemetryClaimsBucketSpec } from './kv-buckets';
import { NATS_ADMIN_USER, natsAuthorizationConfig } from './nats-permissions';
import {
  ensureTelemetry,
  natsConsumerSpecs,
  provisionNatsTopology,
  telemetryConsumerServerSettings,
  type NatsTopologySettings,
} from './nats-topology';
import { batchConsumerSpec } from './batch-consumer';
import { NatsProvisioningRequiredError } from './provisioning-errors';

/**
 * The per-service NATS users (least privilege), against a real nats-server: what each service needs
 * works after nats-setup's provisioning, and the audit's attacks are refused.
 */
describe('NATS users per service', () => {
  const logger = createLogger('nats-permissions', process.env.TEST_LOG_LEVEL ?? 'silent');
  const namespace = 'perm';
  const settings: NatsTopologySettings = {
    namespace,
    telemetryMaxBytes: 64 * 1024 * 1024,
    telemetryConsumers: {},
  };
  const passwords = Object.fromEntries(
    [...SERVICE_NAMES, NATS_ADMIN_USER].map((user) => [user, randomBytes(18).toString('base64url')]),
  ) as Record<ServiceName | typeof NATS_ADMIN_USER, string>;
  const events = eventsStreamName(namespace);
  const telemetry = telemetryStreamName(namespace);
  let server: LocalNatsServer;
  let admin: JetStreamConnection;
  const open: JetStreamConnection[] = [];
  const as = async (user: ServiceName | typeof NATS_ADMIN_USER) => {
    const connection = await connectJetStream({
      url: server.url(user, passwords[user]),
      name: `perm-${user}`,
      logger,
      initialConnectTimeoutMs: 2_000,
    });
    open.push(connection);
    return connection;
  };

  beforeAll(async () => {
    server = await startNatsServer(natsAuthorizationConfig(namespace, passwords));
    admin = await as(NATS_ADMIN_USER);
    await provisionNatsTopology(admin.nc, admin.jsm, settings, logger);
  });

  afterAll(async () => {
    for (const connection of open) await connection.close();
    await server?.stop();
  });

  const inviteCreated = () =>
    newEnvelope('invite.created', {
      org_id: 'o1',
      org_name: 'Acme',
      invite_id: 'i1',
      email: 'a@example.com',
      role: 'ANALYST' as const,
      invited_by_name: 'Ada',
      expires_at: new Date().toISOString(),
      token_sealed: 'v1.x.y.z',
    });
  const codeRequested = () =>
    newEnvelope('enrollment_code.email_requested', {
      org_id: 'o1',
      org_name: 'Acme',
      email: 'attacker@evil.test',
      requested_by_name: 'Ada',
      expires_at: new Date().toISOString(),
      request_id: 'r1',
      code_sealed: 'v1.x.y.z',
      enrollment_key_sealed: 'v1.x.y.z',
    });
  const threatSubjectMessages = async () =>
    (await admin.jsm.streams.info(events, { subjects_filter: `${namespace}.events.threat.detected` })).state
      .subjects?.[`${namespace}.events.threat.detected`] ?? 0;
  const publishBatch = async (gateway: JetStreamConnection, orgId: string, body: string) => {
    const headers = (await import('@nats-io/nats-core')).headers();
    headers.set(TELEMETRY_HEADERS.orgId, orgId);
    headers.set(TELEMETRY_HEADERS.deviceId, 'd1');
    headers.set(TELEMETRY_HEADERS.receivedAt, String(Date.now()));
    return gateway.js.publish(telemetrySubject(namespace, orgId), body, { headers });
  };

  it('made every stream, consumer and bucket; telemetry is freed once both its consumers acknowledged it', async () => {
    for (const spec of natsConsumerSpecs(settings)) {
      await expect(admin.jsm.consumers.info(spec.stream, spec.durableName)).resolves.toBeDefined();
    }
    const info = await admin.jsm.streams.info(telemetry);
    expect(info.config.retention).toBe(RetentionPolicy.Interest);
    expect(info.config.max_bytes).toBe(settings.telemetryMaxBytes);
  });

  it('lets a service publish its own events, and no other service publish them', async () => {
    const identity = await as('identity');
    await expect(
      createEventPublisher(identity.js, namespace, { timeoutMs: 2_000 })(inviteCreated()),
    ).resolves.toBeUndefined();
    const notification = await as('notification');
    await expect(
      createEventPublisher(notification.js, namespace, { timeoutMs: 2_000 })(codeRequested()),
    ).rejects.toThrow();
    await expect(
      createEventPublisher(identity.js, namespace, { timeoutMs: 2_000 })(codeRequested()),
    ).rejects.toThrow();
    const info = await admin.jsm.streams.info(events);
    expect(info.state.messages).toBe(1);
  });

  it("refuses the audit's forgery: a stream on $JS.ACK republishing into threat.detected", async () => {
    const notification = await as('notification');
    await expect(
      notification.jsm.streams.add({
        name: 'FORGE',
        subjects: ['$JS.ACK.x.>'],
        republish: { src: '>', dest: `${namespace}.events.threat.detected` },
      }),
    ).rejects.toThrow(/permission/i);
    // Nor may it change an existing stream to the same end.
    await expect(
      notification.jsm.streams.update(events, { subjects: [`${namespace}.events.>`, '$JS.ACK.x.>'] }),
    ).rejects.toThrow(/permission/i);
    expect(await threatSubjectMessages()).toBe(0);
    await expect(admin.jsm.streams.info('FORGE')).rejects.toThrow();
  });

  it("refuses reading another tenant's telemetry, purging, deleting and making consumers", async () => {
    const gateway = await as('gateway');
    await publishBatch(gateway, 'org-a', '{"secret":"org a telemetry"}');
    const notification = await as('notification');
    await expect(notification.jsm.streams.getMessage(telemetry, { seq: 1 })).rejects.toThrow(/permission/i);
    await expect(notification.jsm.streams.purge(telemetry)).rejects.toThrow(/permission/i);
    await expect(notification.jsm.streams.delete(events)).rejects.toThrow(/permission/i);
    await expect(
      notification.jsm.consumers.add(telemetry, { durable_name: 'peek', ack_policy: AckPolicy.None }),
    ).rejects.toThrow(/permission/i);
    // Nor may it pull through another service's consumer.
    await expect(notification.js.consumers.get(telemetry, 'analytics-telemetry')).rejects.toThrow(
      /permission/i,
    );
    // The gateway, which publishes telemetry, may not read it either.
    await expect(gateway.jsm.streams.getMessage(telemetry, { seq: 1 })).rejects.toThrow(/permission/i);
    expect((await admin.jsm.streams.info(telemetry)).state.messages).toBeGreaterThanOrEqual(1);
  });

  it("refuses listening on the shared inbox, where another service's pulled messages arrive", async () => {
    const notification = await as('notification');
    // The server answers a refused subscription with an error at once; an allowed one stays silent.
    const subscribeOutcome = (subject: string) =>
      Promise.race([
        new Promise<unknown>((resolve) => {
          notification.nc.subscribe(subject, { callback: (error) => resolve(error?.name ?? 'message') });
        }),
        new Promise<unknown>((resolve) => setTimeout(() => resolve('allowed'), 2_000)),
      ]);
    await expect(subscribeOutcome('_INBOX.>')).resolves.toBe('PermissionViolationError');
    await expect(subscribeOutcome('_INBOX_analytics.>')).resolves.toBe('PermissionViolationError');
  });

  it('lets analytics and enrollment take telemetry through their own consumers, under their own inboxes', async () => {
    const gateway = await as('gateway');
    await publishBatch(gateway, 'org-b', '{"batch":"b"}');
    const taken: Record<string, string[]> = { analytics: [], enrollment: [] };
    const consumers = await Promise.all(
      (['analytics', 'enrollment'] as const).map(async (service) => {
        const connection = await as(service);
        const name = service === 'analytics' ? 'analytics-telemetry' : 'enrollment-last-seen';
        return startBatchConsumer({
          ...telemetryConsumerServerSettings(namespace, name),
          js: connection.js,
          jsm: connection.jsm,
          ensureStream: () => ensureTelemetry(connection.jsm, namespace, logger),
          decode: (msg) => msg.headers?.get(TELEMETRY_HEADERS.orgId) ?? '',
          handleBatch: async (batch) => {
            taken[service]?.push(...batch.map((item) => item.value));
          },
          logger,
          maxWaitMs: 10,
        });
      }),
    );
    try {
      await eventually(() => taken.analytics?.includes('org-b'));
      await eventually(() => taken.enrollment?.includes('org-b'));
      // Interest retention: once both acknowledged everything, nothing of it stays on the server.
      await eventually(async () => (await admin.jsm.streams.info(telemetry)).state.messages === 0);
    } finally {
      await Promise.all(consumers.map((consumer) => consumer.stop()));
    }
  });

  it('lets the gateway alone use its rate-limit bucket; other services can neither write, read nor manage it', async () => {
    const gateway = await as('gateway');
    const bucket = await openLimitsBucket(gateway.nc, namespace, { timeoutMs: 2_000 });
    await bucket.put('route.60000.1.abc', '1');
    expect((await bucket.get('route.60000.1.abc'))?.string()).toBe('1');

    const stream = `KV_${limitsBucketName(namespace)}`;
    const identity = await as('identity');
    for (const allowDirect of [true, false]) {
      const foreign = await new Kvm(identity.js).open(limitsBucketName(namespace), {
        allow_direct: allowDirect,
      });
      await expect(foreign.put('route.60000.1.abc', '0')).rejects.toThrow();
      await expect(foreign.get('route.60000.1.abc')).rejects.toThrow();
    }
    await expect(identity.jsm.streams.info(stream)).rejects.toThrow();
    await expect(identity.jsm.streams.purge(stream)).rejects.toThrow();
    await expect(identity.jsm.streams.delete(stream)).rejects.toThrow();
    expect((await bucket.get('route.60000.1.abc'))?.string()).toBe('1');
  });

  it('lets analytics claim telemetry batches in its bucket, and no other service write there', async () => {
    const analytics = await as('analytics');
    const claims = await openKvBucket(analytics.nc, telemetryClaimsBucketSpec(namespace));
    await claims.create('batch', '1');
    const enrollment = await as('enrollment');
    const foreign = await new Kvm(enrollment.js).open(telemetryClaimsBucketName(namespace));
    await expect(foreign.put('batch', '2')).rejects.toThrow();
    expect((await claims.get('batch'))?.string()).toBe('1');
  });

  it('tells a service to run nats-setup when what it needs is missing, and it may not make it', async () => {
    const billing = await as('billing');
    const spec = batchConsumerSpec({
      stream: events,
      durableName: 'billing',
      filterSubjects: [`${namespace}.events.org.created`],
    });
    await admin.jsm.consumers.delete(events, 'billing');
    await expect(ensureDurableConsumer(billing.jsm, spec, logger, true)).rejects.toThrow(
      NatsProvisioningRequiredError,
    );
    await admin.jsm.streams.delete(events);
    await expect(ensureEventsStream(billing.jsm, namespace)).rejects.toThrow(NatsProvisioningRequiredError);
    // nats-setup puts them back.
    await provisionNatsTopology(admin.nc, admin.jsm, settings, logger);
    await expect(ensureDurableConsumer(billing.jsm, spec, logger, false)).resolves.toBeUndefined();
  });

  it('refuses connections without credentials or with a wrong password', async () => {
    await expect(
      connectJetStream({ url: server.url(), name: 'anonymous', logger, initialConnectTimeoutMs: 500 }),
    ).rejects.toThrow();
    await expect(
      connectJetStream({
        url: server.url('identity', 'wrong'),
        name: 'wrong',
        logger,
        initialConnectTimeoutMs: 500,
      }),
    ).rejects.toThrow();
  });
});
