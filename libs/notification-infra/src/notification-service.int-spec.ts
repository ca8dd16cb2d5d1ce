import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { loadConfig } from '@sts/config/load-config';
import { sealSecret } from '@sts/crypto/secrets';
import { AppError } from '@sts/errors/app-error';
import { SEALING_CONTEXTS, type DomainEvent } from '@sts/events/event-catalogue';
import { newEnvelope, type EventEnvelope } from '@sts/events/event-envelope';
import { eventSubject, eventsStreamName } from '@sts/events/subjects';
import { createPromiseClient } from '@sts/grpc/grpc-client';
import { testServiceAuth } from '@sts/testing/service-auth';
import { createLogger } from '@sts/logger/create-logger';
import { createEventPublisher, type EventPublisher } from '@sts/nats/event-publisher';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { NotificationServiceService } from '@sts/proto/gen/notification/v1/notification';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { startSmtpSink, type ReceivedMail, type SmtpSink } from '@sts/stand-ins/smtp-sink';
import { notificationEnvSchema } from './notification-config';
import {
  NOTIFICATION_EMAIL_CONSUMER,
  startNotificationService,
  type RunningService,
} from './start-notification-service';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const sealingKey = randomBytes(32);

let counter = 0;
const memberJoined = (orgId: string, name = `Member ${++counter}`): DomainEvent<'member.joined'> =>
  newEnvelope('member.joined', {
    org_id: orgId,
    member_id: `m-${counter}`,
    user_id: `u-${counter}`,
    email: `member${counter}@example.com`,
    name,
    role: 'ANALYST',
    joined_at: new Date().toISOString(),
  });

describe('notification service (PostgreSQL, NATS, SMTP)', () => {
  const serviceAuth = testServiceAuth();
  const logger = createLogger('notification-int', 'silent');
  const namespace = uniqueNatsNamespace('notif');
  let database: TestDatabase;
  let sink: SmtpSink;
  let service: RunningService;
  let nats: JetStreamConnection;
  let publish: EventPublisher;
  let client: ReturnType<typeof createPromiseClient<typeof NotificationServiceService>>;
  let db: Client;

  /** Publishes without a message id, as a redelivery or a relay retry beyond the duplicate window would. */
  const publishAgain = async (envelope: EventEnvelope) => {
    await nats.js.publish(
      eventSubject(namespace, envelope.type as DomainEvent['type']),
      JSON.stringify(envelope),
    );
  };

  const feed = (
    orgId: string,
    userId: string,
    extra: { limit?: number; cursor?: string; unreadOnly?: boolean } = {},
  ) =>
    client.listNotifications({
      orgId,
      userId,
      limit: extra.limit ?? 0,
      cursor: extra.cursor ?? '',
      unreadOnly: extra.unreadOnly ?? false,
    });

  const waitForItem = (orgId: string, id: string) =>
    eventually(async () =>
      (await feed(orgId, 'observer', { limit: 200 })).notifications.find((n) => n.id === id),
    );

  beforeAll(async () => {
    database = await createTestDatabase('notification');
    sink = await startSmtpSink();
    const config = loadConfig(notificationEnvSchema, {
      DATABASE_URL: database.url,
      NATS_URL,
      NATS_NAMESPACE: namespace,
      GRPC_PORT: '0',
      ...serviceAuth.envOf('notification'),
      SMTP_URL: sink.url,
      MAIL_FROM: 'Security Telemetry <no-reply@test.local>',
      SECRET_SEALING_KEY: sealingKey.toString('base64'),
      PUBLIC_APP_URL: 'https://app.test',
      PUBLIC_API_URL: 'https://api.test/',
      LOG_LEVEL: 'silent',
    });
    service = await startNotificationService(config, logger);
    nats = await connectJetStream({ url: NATS_URL, name: 'notification-int-test', logger });
    publish = createEventPublisher(nats.js, namespace);
    client = createPromiseClient(
      NotificationServiceService,
      `127.0.0.1:${service.grpcPort}`,
      5_000,
      serviceAuth.as('notification'),
    );
    db = new Client({ connectionString: database.url });
    await db.connect();
  });

  afterAll(async () => {
    client?.close();
    await db?.end();
    await service?.stop();
    if (nats) {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
    await sink?.close();
    await database?.drop();
  });

  it('turns member.joined into a feed item served over gRPC', async () => {
    const event = memberJoined('org-a', 'Ada Lovelace');
    await publish(event);

    const item = await waitForItem('org-a', event.id);

    expect(item).toMatchObject({
      id: event.id,
      type: 'member.joined',
      message: `Ada Lovelace (${event.data.email}) joined as ANALYST`,
      read: false,
    });
    expect(item.createdAt).toBeInstanceOf(Date);
    const page = await feed('org-a', 'user-a');
    expect(page.unreadCount).toBeGreaterThanOrEqual(1);
  });

  it('keeps read state per user', async () => {
    const event = memberJoined('org-b');
    await publish(event);
    await waitForItem('org-b', event.id);

    const marked = await client.markRead({ orgId: 'org-b', userId: 'alice', notificationId: event.id });
    expect(marked.notification).toMatchObject({ id: event.id, read: true });
    // Idempotent.
    await expect(
      client.markRead({ orgId: 'org-b', userId: 'alice', notificationId: event.id }),
    ).resolves.toBeDefined();

    const alice = await feed('org-b', 'alice');
    const bob = await feed('org-b', 'bob');
    expect(alice.notifications.find((n) => n.id === event.id)?.read).toBe(true);
    expect(alice.unreadCount).toBe(0);
    expect(bob.notifications.find((n) => n.id === event.id)?.read).toBe(false);
    expect(bob.unreadCount).toBe(1);
    expect((await feed('org-b', 'bob', { unreadOnly: true })).notifications.map((n) => n.id)).toEqual([
      event.id,
    ]);
    expect((await feed('org-b', 'alice', { unreadOnly: true })).notifications).toEqual([]);
  });

  it('marks all read with a watermark: items arriving later are unread', async () => {
    const first = memberJoined('org-c');
    const second = memberJoined('org-c');
    // One after the other, so that they do not share a millisecond (ties are ordered by id).
    await publish(first);
    await waitForItem('org-c', first.id);
    await sleep(5);
    await publish(second);
    await waitForItem('org-c', second.id);
    await sleep(5);

    expect((await client.markAllRead({ orgId: 'org-c', userId: 'carol' })).marked).toBe(2);
    expect((await client.markAllRead({ orgId: 'org-c', userId: 'carol' })).marked).toBe(0);

    const later = memberJoined('org-c');
    await publish(later);
    await waitForItem('org-c', later.id);

    const page = await feed('org-c', 'carol');
    expect(page.notifications.map((n) => [n.id, n.read])).toEqual([
      [later.id, false],
      [second.id, true],
      [first.id, true],
    ]);
    expect(page.unreadCount).toBe(1);
    expect((await feed('org-c', 'dave')).unreadCount).toBe(3);
  });

  it('keeps organizations apart', async () => {
    const event = memberJoined('org-d');
    await publish(event);
    await waitForItem('org-d', event.id);

    expect((await feed('org-other', 'mallory')).notifications.map((n) => n.id)).not.toContain(event.id);
    const error = await client
      .markRead({ orgId: 'org-other', userId: 'mallory', notificationId: event.id })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('NOTIFICATION_NOT_FOUND');
    await expect(
      client.markRead({ orgId: 'org-d', userId: 'x', notificationId: 'nope' }),
    ).rejects.toMatchObject({
      code: 'NOTIFICATION_NOT_FOUND',
    });
    await expect(
      client.listNotifications({ orgId: '', userId: 'x', limit: 0, cursor: '', unreadOnly: false }),
    ).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
    // Mallory's read-all does not touch org-d.
    await client.markAllRead({ orgId: 'org-other', userId: 'mallory' });
    expect((await feed('org-d', 'mallory')).unreadCount).toBe(1);
  });

  it('creates one item for a redelivered event id', async () => {
    const event = memberJoined('org-e');
    await publish(event);
    await publishAgain(event);
    await publishAgain(event);
    const marker = memberJoined('org-e');
    await publish(marker);
    await waitForItem('org-e', marker.id);

    const page = await feed('org-e', 'erin');
    expect(page.notifications.map((n) => n.id).sort()).toEqual([marker.id, event.id].sort());
  });

  it('pages the feed newest first with a cursor', async () => {
    const events = Array.from({ length: 5 }, () => memberJoined('org-f'));
    for (const event of events) await publish(event);
    await eventually(async () => (await feed('org-f', 'frank')).notifications.length === 5);

    const all = (await feed('org-f', 'frank')).notifications.map((n) => n.id);
    const seen: string[] = [];
    let cursor = '';
    do {
      const page = await feed('org-f', 'frank', { limit: 2, cursor });
      seen.push(...page.notifications.map((n) => n.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual(all);
    expect(new Set(seen)).toEqual(new Set(events.map((e) => e.id)));
    await expect(feed('org-f', 'frank', { limit: 500 })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await expect(feed('org-f', 'frank', { cursor: 'bogus' })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
  });

  describe('invitation e-mails', () => {
    const token = 'sts_inv_' + randomBytes(32).toString('base64url');
    const invite = newEnvelope('invite.created', {
      org_id: 'org-g',
      org_name: 'Acme & <Sons>',
      invite_id: 'inv-1',
      email: 'grace@example.com',
      role: 'APP_USER' as const,
      invited_by_name: 'Ada Lovelace',
      expires_at: new Date(Date.now() + 7 * 24 * 3600_000).toISOString(),
      token_sealed: sealSecret(
        token,
        sealingKey,
        SEALING_CONTEXTS.inviteToken({ org_id: 'org-g', email: 'grace@example.com', invite_id: 'inv-1' }),
      ),
    });
    const toGrace = (mail: ReceivedMail) => mail.envelope.to.includes('grace@example.com');

    it('sends one e-mail with the token and the accept link', async () => {
      await publish(invite);

      const message = await sink.waitFor(toGrace, 10_000);

      expect(message.subject).toBe("You're invited to join Acme & <Sons> on Security Telemetry");
      expect(message.recipients.map((r) => r.address)).toEqual(['grace@example.com']);
      expect(message.from).toContain('no-reply@test.local');
      expect(message.text).toContain(`https://app.test/invites/accept#token=${token}`);
      expect(message.text).toContain(`Your invitation token: ${token}`);
      expect(message.text).toContain('POST https://app.test/api/invites/accept');
      expect(message.html).toContain(`href="https://app.test/invites/accept#token=${token}"`);
      expect(message.html).toContain('Acme &amp; &lt;Sons&gt;');

      const log = await eventually(async () => {
        const { rows } = await db.query<{
          event_id: string;
          recipient: string;
          subject: string;
          template: string;
        }>('select event_id, recipient, subject, template from notification.email_log where event_id = $1', [
          invite.id,
        ]);
        return rows.length > 0 ? rows : undefined;
      });
      expect(log).toEqual([
        { event_id: invite.id, recipient: 'grace@example.com', subject: message.subject, template: 'invite' },
      ]);
    });

    it('does not send a second e-mail for a duplicate event', async () => {
      await publishAgain(invite);
      const marker = memberJoined('org-g');
      await publish(marker);
      await waitForItem('org-g', marker.id);

      expect(sink.messages.filter(toGrace)).toHaveLength(1);
      const { rows } = await db.query(
        'select count(*)::int as n from notification.email_log where event_id = $1',
        [invite.id],
      );
      expect(rows[0]).toEqual({ n: 1 });
    });

    it('keeps the token out of every table', async () => {
      const { rows } = await db.query<{ dump: string }>(
        `select concat_ws('|',
           (select string_agg(t::text, '|') from notification.email_log t),
           (select string_agg(t::text, '|') from notification.processed_events t),
           (select string_agg(t::text, '|') from notification.feed_items t)) as dump`,
      );
      expect(rows[0]?.dump).not.toContain(token);
      expect(rows[0]?.dump).not.toContain(invite.data.token_sealed);
    });
  });

  describe('device feed items', () => {
    const deviceEnrolled = (orgId: string, hostname: string, reEnrolled = false) =>
      newEnvelope('device.enrolled', {
        org_id: orgId,
        device_id: `dev-${++counter}`,
        machine_id: `machine-${counter}`,
        hostname,
        enrolled_at: new Date().toISOString(),
        re_enrolled: reEnrolled,
      });
    const deviceChange = (type: 'device.disabled' | 'device.enabled', orgId: string, hostname: string) =>
      newEnvelope(type, {
        org_id: orgId,
        device_id: `dev-${++counter}`,
        hostname,
        at: new Date().toISOString(),
      });

    it('turns device.enrolled and device.disabled into feed items naming the hostname', async () => {
      const enrolled = deviceEnrolled('org-h', 'web-01');
      const again = deviceEnrolled('org-h', 'web-01', true);
      const disabled = deviceChange('device.disabled', 'org-h', 'db-02');
      await publish(enrolled);
      await publish(again);
      await publish(disabled);

      expect(await waitForItem('org-h', enrolled.id)).toMatchObject({
        type: 'device.enrolled',
        message: 'Device "web-01" was enrolled',
        read: false,
      });
      expect(await waitForItem('org-h', again.id)).toMatchObject({
        type: 'device.enrolled',
        message: 'Device "web-01" was enrolled again; its previous device token no longer works',
      });
      expect(await waitForItem('org-h', disabled.id)).toMatchObject({
        type: 'device.disabled',
        message: 'Device "db-02" was disabled',
      });
      expect((await feed('org-h', 'hank')).unreadCount).toBe(3);
    });

    it('stores a hostile hostname as one capped line of plain text', async () => {
      const event = deviceEnrolled(
        'org-i',
        `  <img src=x onerror=alert(1)>\r\n\u0000\u001b[31m\u202e${'h'.repeat(2_000)}  `,
      );
      await publish(event);

      const item = await waitForItem('org-i', event.id);

      expect(item.message).toMatch(/^Device "<img src=x onerror=alert\(1\)> \[31mh+…" was enrolled$/);
      expect(item.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
      expect(Array.from(item.message).length).toBe(255 + 'Device "" was enrolled'.length);
    });

    it('creates one item per event id and none for device.enabled or device.deleted', async () => {
      const event = deviceEnrolled('org-j', 'laptop-7');
      await publish(event);
      await publishAgain(event);
      await publish(deviceChange('device.enabled', 'org-j', 'laptop-7'));
      await publish(
        newEnvelope('device.deleted', {
          org_id: 'org-j',
          device_id: 'dev-gone',
          machine_id: 'machine-gone',
          hostname: 'laptop-7',
          at: new Date().toISOString(),
        }),
      );
      await publishAgain(event);
      const marker = deviceChange('device.disabled', 'org-j', 'marker');
      await publish(marker);
      await waitForItem('org-j', marker.id);

      const page = await feed('org-j', 'jane');
      expect(page.notifications.map((n) => [n.type, n.message]).sort()).toEqual([
        ['device.disabled', 'Device "marker" was disabled'],
        ['device.enrolled', 'Device "laptop-7" was enrolled'],
      ]);
    });
  });

  describe('enrollment code e-mails', () => {
    const code = 'K7QD-M3XP';
    const enrollmentKey = 'sts_ek_' + randomBytes(32).toString('base64url');
    const expiresAt = new Date(Date.now() + 24 * 3600_000);
    const opsRecipient = { org_id: 'org-k', email: 'ops@example.com', request_id: 'req-k' };
    const requested = newEnvelope('enrollment_code.email_requested', {
      org_id: 'org-k',
      org_name: 'Acme & <Sons>',
      email: 'ops@example.com',
      requested_by_name: 'Ada Lovelace',
      expires_at: expiresAt.toISOString(),
      request_id: 'req-k',
      code_sealed: sealSecret(code, sealingKey, SEALING_CONTEXTS.enrollmentCode(opsRecipient)),
      enrollment_key_sealed: sealSecret(
        enrollmentKey,
        sealingKey,
        SEALING_CONTEXTS.enrollmentKey(opsRecipient),
      ),
    });
    const toOps = (mail: ReceivedMail) => mail.envelope.to.includes('ops@example.com');
    const command = `agent enroll --server https://api.test --key ${enrollmentKey} --code ${code}`;

    it('sends one e-mail with the code, the key and the enroll command', async () => {
      await publish(requested);

      const message = await sink.waitFor(toOps, 10_000);

      expect(message.subject).toBe('Install the Security Telemetry agent for Acme & <Sons>');
      expect(message.recipients.map((r) => r.address)).toEqual(['ops@example.com']);
      expect(message.text).toContain(`Your one-time enrollment code: ${code}`);
      expect(message.text).toContain(`Your organization's enrollment key: ${enrollmentKey}`);
      expect(message.text).toContain(
        `It expires at ${expiresAt.toISOString().slice(0, 16).replace('T', ' ')} UTC and works once`,
      );
      expect(message.text).toContain(command);
      expect(message.text).toContain(
        `export STS_SERVER_URL=https://api.test\n  export STS_ENROLLMENT_KEY=${enrollmentKey}`,
      );
      expect(message.text).toContain(`export STS_ENROLLMENT_CODE=${code}\n  agent enroll\n`);
      expect(message.text).toContain('agent status');
      expect(message.html).toContain(`<code>${code}</code>`);
      expect(message.html).toContain(`>${command}</pre>`);
      expect(message.html).toContain('Acme &amp; &lt;Sons&gt;');

      const log = await eventually(async () => {
        const { rows } = await db.query<{
          event_id: string;
          recipient: string;
          subject: string;
          template: string;
        }>('select event_id, recipient, subject, template from notification.email_log where event_id = $1', [
          requested.id,
        ]);
        return rows.length > 0 ? rows : undefined;
      });
      expect(log).toEqual([
        {
          event_id: requested.id,
          recipient: 'ops@example.com',
          subject: message.subject,
          template: 'enrollment_code',
        },
      ]);
    });

    it('does not send a second e-mail for a duplicate event', async () => {
      await publishAgain(requested);
      await publishAgain(requested);
      const marker = memberJoined('org-k');
      await publish(marker);
      await waitForItem('org-k', marker.id);

      expect(sink.messages.filter(toOps)).toHaveLength(1);
      const { rows } = await db.query(
        'select count(*)::int as n from notification.email_log where event_id = $1',
        [requested.id],
      );
      expect(rows[0]).toEqual({ n: 1 });
    });

    it('does not e-mail the sealed code and key to anyone else when the message is replayed with another recipient', async () => {
      // An attacker who can publish on the stream copies the real message and changes the e-mail.
      const replayed = newEnvelope('enrollment_code.email_requested', {
        ...requested.data,
        email: 'attacker@evil.test',
      });
      await publish(replayed);
      const toAttacker = (mail: ReceivedMail) => mail.envelope.to.includes('attacker@evil.test');
      // Proved from the consumer's state: the replay was delivered and terminated (acked), not left to retry.
      await eventually(async () => {
        const info = await nats.jsm.consumers.info(eventsStreamName(namespace), NOTIFICATION_EMAIL_CONSUMER);
        const stored = await nats.jsm.streams.getMessage(eventsStreamName(namespace), {
          last_by_subj: eventSubject(namespace, 'enrollment_code.email_requested'),
        });
        return stored && info.ack_floor.stream_seq >= stored.seq && info.num_ack_pending === 0
          ? true
          : undefined;
      });
      expect(sink.messages.filter(toAttacker)).toHaveLength(0);
      const { rows } = await db.query(
        'select count(*)::int as n from notification.email_log where event_id = $1',
        [replayed.id],
      );
      expect(rows[0]).toEqual({ n: 0 });
    });

    it('keeps the code and the key out of every table', async () => {
      const { rows } = await db.query<{ dump: string }>(
        `select concat_ws('|',
           (select string_agg(t::text, '|') from notification.email_log t),
           (select string_agg(t::text, '|') from notification.processed_events t),
           (select string_agg(t::text, '|') from notification.feed_items t)) as dump`,
      );
      for (const secret of [
        code,
        enrollmentKey,
        requested.data.code_sealed,
        requested.data.enrollment_key_sealed,
      ]) {
        expect(rows[0]?.dump).not.toContain(secret);
      }
    });
  });
});

describe('notification service when SMTP is down', () => {
  const logger = createLogger('notification-int-smtp-down', 'silent');
  const namespace = uniqueNatsNamespace('notifdown');
  let database: TestDatabase;
  let sink: SmtpSink;
  let nats: JetStreamConnection;
  let db: Client;
  const running: RunningService[] = [];

  const configWith = (smtpUrl: string) =>
    loadConfig(notificationEnvSchema, {
      DATABASE_URL: database.url,
      NATS_URL,
      NATS_NAMESPACE: namespace,
      GRPC_PORT: '0',
      ...testServiceAuth().envOf('notification'),
      SMTP_URL: smtpUrl,
      SECRET_SEALING_KEY: sealingKey.toString('base64'),
      LOG_LEVEL: 'silent',
    });

  beforeAll(async () => {
    database = await createTestDatabase('notifsmtp');
    sink = await startSmtpSink();
    nats = await connectJetStream({ url: NATS_URL, name: 'notification-int-test', logger });
    db = new Client({ connectionString: database.url });
    await db.connect();
  });

  afterAll(async () => {
    for (const service of running) await service.stop();
    await db?.end();
    if (nats) {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
    await sink?.close();
    await database?.drop();
  });

  it('records nothing while sending fails, and sends each e-mail once when the redelivery succeeds', async () => {
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    const down = await startNotificationService(configWith('smtp://127.0.0.1:1'), logger);
    running.push(down);
    const invite = newEnvelope('invite.created', {
      org_id: 'org-z',
      org_name: 'Zeta',
      invite_id: 'inv-z',
      email: 'zoe@example.com',
      role: 'ANALYST' as const,
      invited_by_name: 'Ada',
      expires_at: new Date(Date.now() + 24 * 3600_000).toISOString(),
      token_sealed: sealSecret(
        'sts_inv_retry-token',
        sealingKey,
        SEALING_CONTEXTS.inviteToken({ org_id: 'org-z', email: 'zoe@example.com', invite_id: 'inv-z' }),
      ),
    });
    const zedRecipient = { org_id: 'org-z', email: 'zed@example.com', request_id: 'req-z' };
    const codeRequested = newEnvelope('enrollment_code.email_requested', {
      org_id: 'org-z',
      org_name: 'Zeta',
      email: 'zed@example.com',
      requested_by_name: 'Ada',
      expires_at: new Date(Date.now() + 24 * 3600_000).toISOString(),
      request_id: 'req-z',
      code_sealed: sealSecret('ZZZZ-RTRY', sealingKey, SEALING_CONTEXTS.enrollmentCode(zedRecipient)),
      enrollment_key_sealed: sealSecret(
        'sts_ek_retry-key',
        sealingKey,
        SEALING_CONTEXTS.enrollmentKey(zedRecipient),
      ),
    });
    await createEventPublisher(nats.js, namespace)(invite);
    await createEventPublisher(nats.js, namespace)(codeRequested);

    // The first deliveries fail, are rolled back and nak'd: the server delivers them again.
    await eventually(async () => {
      const info = await nats.jsm.consumers.info(eventsStreamName(namespace), NOTIFICATION_EMAIL_CONSUMER);
      return info.num_redelivered >= 2 ? true : undefined;
    });
    expect((await db.query('select 1 from notification.processed_events')).rowCount).toBe(0);
    expect((await db.query('select 1 from notification.email_log')).rowCount).toBe(0);
    await down.stop();

    // The same durable consumer, now with a working SMTP server, gets the event again.
    running.push(await startNotificationService(configWith(sink.url), logger));
    const toZoe = (mail: ReceivedMail) => mail.envelope.to.includes('zoe@example.com');
    const message = await sink.waitFor(toZoe, 15_000);
    expect(message.text).toContain('sts_inv_retry-token');
    await eventually(async () =>
      (await db.query('select 1 from notification.email_log where event_id = $1', [invite.id])).rowCount === 1
        ? true
        : undefined,
    );
    expect(sink.messages.filter(toZoe)).toHaveLength(1);

    const toZed = (mail: ReceivedMail) => mail.envelope.to.includes('zed@example.com');
    const codeMessage = await sink.waitFor(toZed, 15_000);
    expect(codeMessage.text).toContain(
      'agent enroll --server http://localhost:8080 --key sts_ek_retry-key --code ZZZZ-RTRY',
    );
    await eventually(async () =>
      (await db.query('select 1 from notification.email_log where event_id = $1', [codeRequested.id]))
        .rowCount === 1
        ? true
        : undefined,
    );
    expect(sink.messages.filter(toZed)).toHaveLength(1);
  });
});
