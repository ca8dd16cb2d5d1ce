import { randomBytes } from 'node:crypto';
import { AckPolicy } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { newEnvelope } from '@sts/events/event-envelope';
import { telemetryClaimsBucketName } from '@sts/events/telemetry';
import { createLogger } from '@sts/logger/create-logger';
import { startNatsServer, type LocalNatsServer } from '@sts/testing/nats-server';
import { SERVICE_NAMES, type ServiceName } from '@sts/vocabulary/services';
import { createEventPublisher } from './event-publisher';
import { ensureEventsStream } from './event-stream';
import { connectJetStream, type JetStreamConnection } from './jetstream-connection';
import { limitsBucketName, openLimitsBucket } from './limits-bucket';
import { NATS_ADMIN_USER, natsAuthorizationConfig } from './nats-permissions';

/** The per-service NATS users the project's scripts configure, against a real nats-server. */
describe('NATS users per service', () => {
  const logger = createLogger('nats-permissions', 'silent');
  const namespace = 'perm';
  const passwords = Object.fromEntries(
    [...SERVICE_NAMES, NATS_ADMIN_USER].map((user) => [user, randomBytes(18).toString('base64url')]),
  ) as Record<ServiceName | typeof NATS_ADMIN_USER, string>;
  let server: LocalNatsServer;
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
    await ensureEventsStream((await as(NATS_ADMIN_USER)).jsm, namespace);
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

  it('lets a service publish its own events', async () => {
    const identity = await as('identity');
    await expect(
      createEventPublisher(identity.js, namespace, { timeoutMs: 2_000 })(inviteCreated()),
    ).resolves.toBeUndefined();
  });

  it("refuses a service publishing another service's events", async () => {
    const notification = await as('notification');
    await expect(
      createEventPublisher(notification.js, namespace, { timeoutMs: 2_000 })(codeRequested()),
    ).rejects.toThrow();
    const identity = await as('identity');
    await expect(
      createEventPublisher(identity.js, namespace, { timeoutMs: 2_000 })(codeRequested()),
    ).rejects.toThrow();
    // Nothing of it reached the stream: only identity's invite is there.
    const info = await (await as(NATS_ADMIN_USER)).jsm.streams.info(`${namespace.toUpperCase()}_EVENTS`);
    expect(info.state.messages).toBe(1);
  });

  it('lets a consumer read the stream with its durable consumer', async () => {
    const notification = await as('notification');
    await notification.jsm.consumers.add(`${namespace.toUpperCase()}_EVENTS`, {
      durable_name: 'notification',
      ack_policy: AckPolicy.Explicit,
    });
    const consumer = await notification.js.consumers.get(`${namespace.toUpperCase()}_EVENTS`, 'notification');
    const message = await consumer.next({ expires: 2_000 });
    expect(message?.subject).toBe(`${namespace}.events.invite.created`);
    await message?.ackAck();
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
    await expect(
      identity.jsm.consumers.add(stream, { durable_name: 'peek', ack_policy: AckPolicy.None }),
    ).rejects.toThrow();
    // The services' own streams are theirs as before, and the count is untouched.
    await expect(identity.jsm.streams.info(`${namespace.toUpperCase()}_EVENTS`)).resolves.toBeDefined();
    expect((await bucket.get('route.60000.1.abc'))?.string()).toBe('1');
  });

  it('lets analytics claim telemetry batches in its bucket, and no other service write there', async () => {
    const analytics = await as('analytics');
    const claims = await new Kvm(analytics.nc).create(telemetryClaimsBucketName(namespace), { ttl: 60_000 });
    await claims.create('batch', '1');
    const enrollment = await as('enrollment');
    const foreign = await new Kvm(enrollment.js).open(telemetryClaimsBucketName(namespace));
    await expect(foreign.put('batch', '2')).rejects.toThrow();
    expect((await claims.get('batch'))?.string()).toBe('1');
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
