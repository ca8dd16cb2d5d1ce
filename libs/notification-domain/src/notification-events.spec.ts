import { randomBytes } from 'node:crypto';
import { sealSecret } from '@sts/crypto/secrets';
import { SEALING_CONTEXTS, type DomainEvent } from '@sts/events/event-catalogue';
import { newEnvelope } from '@sts/events/event-envelope';
import { NotificationEventHandler, type FeedEvent, type NotificationEvent } from './notification-events';
import { InMemoryNotificationStore, ManualClock, RecordingMailer } from './test/in-memory-notification-store';

const key = randomBytes(32);
const TOKEN = 'sts_inv_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG';

const memberJoined = (): DomainEvent<'member.joined'> =>
  newEnvelope('member.joined', {
    org_id: 'org-1',
    member_id: 'm1',
    user_id: 'u1',
    email: 'ada@example.com',
    name: 'Ada Lovelace',
    role: 'ANALYST',
    joined_at: '2026-03-01T10:00:00.000Z',
  });

const inviteCreated = (sealingKey = key): DomainEvent<'invite.created'> =>
  newEnvelope('invite.created', {
    org_id: 'org-1',
    org_name: 'Acme <Labs>',
    invite_id: 'i1',
    email: 'grace@example.com',
    role: 'APP_USER',
    invited_by_name: 'Ada Lovelace',
    expires_at: '2026-03-08T10:00:00.000Z',
    token_sealed: sealSecret(
      TOKEN,
      sealingKey,
      SEALING_CONTEXTS.inviteToken({ org_id: 'org-1', email: 'grace@example.com', invite_id: 'i1' }),
    ),
  });

const CODE = '7KQD-M3XP';
const ENROLLMENT_KEY = 'sts_ek_Q2hhbmdlTWUtMTIzNDU2Nzg5MGFiY2RlZg';

const deviceEnrolled = (hostname = 'web-01', re_enrolled = false): DomainEvent<'device.enrolled'> =>
  newEnvelope('device.enrolled', {
    org_id: 'org-1',
    device_id: 'd1',
    machine_id: 'machine-1',
    hostname,
    enrolled_at: '2026-03-01T10:00:00.000Z',
    re_enrolled,
  });

const deviceDisabled = (hostname = 'web-01'): DomainEvent<'device.disabled'> =>
  newEnvelope('device.disabled', {
    org_id: 'org-1',
    device_id: 'd1',
    hostname,
    at: '2026-03-01T10:00:00.000Z',
  });

const CODE_RECIPIENT = { org_id: 'org-1', email: 'ops@example.com', request_id: 'r1' };
const codeEmailRequested = (
  sealingKey = key,
  contexts = {
    code: SEALING_CONTEXTS.enrollmentCode(CODE_RECIPIENT),
    key: SEALING_CONTEXTS.enrollmentKey(CODE_RECIPIENT),
  },
  data: Partial<{ email: string; org_id: string; request_id: string }> = {},
): DomainEvent<'enrollment_code.email_requested'> =>
  newEnvelope('enrollment_code.email_requested', {
    org_id: 'org-1',
    org_name: 'Acme <Labs>',
    email: 'ops@example.com',
    requested_by_name: 'Ada Lovelace',
    expires_at: '2026-03-02T10:00:00.000Z',
    request_id: 'r1',
    ...data,
    code_sealed: sealSecret(CODE, sealingKey, contexts.code),
    enrollment_key_sealed: sealSecret(ENROLLMENT_KEY, sealingKey, contexts.key),
  });

/** A handler over fresh in-memory ports; `publicApiUrl` is the only setting that varies. */
function setUp(publicApiUrl: string) {
  const store = new InMemoryNotificationStore();
  const mailer = new RecordingMailer();
  const clock = new ManualClock();
  const admins = new Map<string, string[]>();
  const handler = new NotificationEventHandler(
    store,
    mailer,
    { emailsOf: async (orgId) => admins.get(orgId) ?? [] },
    clock,
    {
      sealingKey: key,
      publicAppUrl: 'http://localhost:8080',
      publicApiUrl,
    },
  );
  return { store, mailer, clock, handler, admins };
}

describe('notification event handling', () => {
  let store: InMemoryNotificationStore;
  let mailer: RecordingMailer;
  let clock: ManualClock;
  let handler: NotificationEventHandler;

  beforeEach(() => {
    ({ store, mailer, clock, handler } = setUp('https://api.example.com'));
  });

  it('e-mails a failed payment to each admin the directory names, once per event id', async () => {
    const context = setUp('https://api.example.com');
    context.admins.set('org-1', ['ada@example.com', 'grace@example.com']);
    const event = newEnvelope('billing.payment_failed', {
      org_id: 'org-1',
      amount_due: 2900,
      currency: 'usd',
      invoice_url: 'https://invoice.stripe.test/i/1',
      next_attempt_at: '2026-11-28T12:00:00.000Z',
      failed_at: '2026-11-25T12:00:00.000Z',
    });

    expect(await context.handler.handle(event)).toBe('applied');
    expect(await context.handler.handle(event)).toBe('duplicate');

    expect(context.mailer.sent.map((mail) => [mail.to, mail.subject])).toEqual([
      ['ada@example.com', 'Security Telemetry: a payment of $29.00 failed'],
      ['grace@example.com', 'Security Telemetry: a payment of $29.00 failed'],
    ]);
    expect(context.mailer.sent[0]?.text).toContain('https://invoice.stripe.test/i/1');
    expect(context.mailer.sent[0]?.text).toContain('http://localhost:8080/billing');
    expect(context.store.state.emailLog.map((entry) => entry.template)).toEqual([
      'payment_failed',
      'payment_failed',
    ]);
  });

  it('turns member.joined into one feed item, once per event id', async () => {
    const event = memberJoined();

    expect(await handler.handle(event)).toBe('applied');
    expect(await handler.handle(event)).toBe('duplicate');

    expect(store.state.feed).toEqual([
      {
        id: event.id,
        orgId: 'org-1',
        type: 'member.joined',
        message: 'Ada Lovelace (ada@example.com) joined as ANALYST',
        createdAt: clock.now(),
      },
    ]);
  });

  it('writes a batch of feed events in one transaction, each once, and reports each outcome in order', async () => {
    const earlier = deviceEnrolled('web-00');
    await handler.handle(earlier);
    const batch = [deviceEnrolled('web-01'), memberJoined(), deviceDisabled('web-02'), earlier];
    const before = store.transactions;

    const results = await handler.handleFeedBatch(batch);

    expect(store.transactions - before).toBe(1);
    expect(results).toEqual([
      { outcome: 'applied' },
      { outcome: 'applied' },
      { outcome: 'applied' },
      { outcome: 'duplicate' },
    ]);
    expect(store.state.feed.map((item) => [item.id, item.type])).toEqual([
      [earlier.id, 'device.enrolled'],
      [batch[0]?.id, 'device.enrolled'],
      [batch[1]?.id, 'member.joined'],
      [batch[2]?.id, 'device.disabled'],
    ]);
    // Newest first by time keeps the stream's order: the batch's items are a millisecond apart.
    expect(store.state.feed.slice(1).map((item) => clock.now().getTime() - item.createdAt.getTime())).toEqual(
      [2, 1, 0],
    );
    // A redelivered batch changes nothing.
    expect(await handler.handleFeedBatch(batch)).toEqual(batch.map(() => ({ outcome: 'duplicate' })));
    expect(store.state.feed).toHaveLength(4);
  });

  it('when a batch cannot be written, writes each event alone, so that only the failing one is retried', async () => {
    const batch = [deviceEnrolled('web-01'), deviceEnrolled('poison'), memberJoined()];
    store.refuseFeedItem = (item) => item.id === batch[1]?.id;

    const results = await handler.handleFeedBatch(batch);

    expect(results[0]).toEqual({ outcome: 'applied' });
    expect(results[1]).toEqual({ error: new Error('feed item refused') });
    expect(results[2]).toEqual({ outcome: 'applied' });
    expect(store.state.feed.map((item) => item.id)).toEqual([batch[0]?.id, batch[2]?.id]);
    // The failed event's ledger entry was rolled back with its item: its redelivery applies it.
    store.refuseFeedItem = () => false;
    expect(await handler.handleFeedBatch([batch[1] as FeedEvent])).toEqual([{ outcome: 'applied' }]);
  });

  it('turns threat.detected into a threat.alert item and one delivery per endpoint of its organization, once', async () => {
    store.state.alertEndpoints.push(
      {
        id: 'e1',
        orgId: 'org-1',
        url: 'https://a.example/',
        description: null,
        createdAt: clock.now(),
        secretSealed: 's',
        previousSecretSealed: null,
        previousSecretExpiresAt: null,
        disabledAt: null,
      },
      {
        id: 'e2',
        orgId: 'org-1',
        url: 'https://b.example/',
        description: null,
        createdAt: clock.now(),
        secretSealed: 's',
        previousSecretSealed: null,
        previousSecretExpiresAt: null,
        disabledAt: null,
      },
      {
        id: 'e3',
        orgId: 'org-2',
        url: 'https://c.example/',
        description: null,
        createdAt: clock.now(),
        secretSealed: 's',
        previousSecretSealed: null,
        previousSecretExpiresAt: null,
        disabledAt: null,
      },
    );
    const threat = newEnvelope('threat.detected', {
      org_id: 'org-1',
      device_id: 'd1',
      hostname: 'kiosk',
      dangerous_blocks: 5,
      window_minutes: 10,
      detected_at: '2026-03-01T10:00:00.000Z',
    });

    expect(await handler.handleFeedBatch([threat, threat])).toEqual([
      { outcome: 'applied' },
      { outcome: 'duplicate' },
    ]);

    expect(store.state.feed.map((item) => item.type)).toEqual(['threat.alert']);
    expect(store.state.alertDeliveries.map((d) => [d.endpointId, d.status, d.eventType])).toEqual([
      ['e1', 'pending', 'alert.threat_detected'],
      ['e2', 'pending', 'alert.threat_detected'],
    ]);
    expect(JSON.parse(store.state.alertDeliveries[0]!.body)).toMatchObject({
      id: threat.id,
      type: 'alert.threat_detected',
    });
  });

  it('turns billing.updated into a billing.updated item with its summary as one line of plain text', async () => {
    const event: DomainEvent<'billing.updated'> = newEnvelope('billing.updated', {
      org_id: 'org-1',
      plan: 'pro',
      status: 'active',
      billing_cycle: 'annual',
      expires_at: '2027-11-25T12:00:00.000Z',
      summary: 'Subscription active: Pro,\nbilled yearly',
    });
    expect(await handler.handleFeedBatch([event])).toEqual([{ outcome: 'applied' }]);
    expect(store.state.feed).toEqual([
      expect.objectContaining({
        id: event.id,
        type: 'billing.updated',
        message: 'Subscription active: Pro, billed yearly',
      }),
    ]);
  });

  it('e-mails an invitation once per event id, with the opened token, and logs no secret', async () => {
    const event = inviteCreated();

    expect(await handler.handle(event)).toBe('applied');
    expect(await handler.handle(event)).toBe('duplicate');

    expect(mailer.sent).toHaveLength(1);
    const [email] = mailer.sent;
    expect(email?.to).toBe('grace@example.com');
    expect(email?.subject).toBe("You're invited to join Acme <Labs> on Security Telemetry");
    expect(email?.text).toContain(`http://localhost:8080/invites/accept#token=${TOKEN}`);
    expect(email?.html).toContain('Acme &lt;Labs&gt;');
    expect(store.state.emailLog).toEqual([
      {
        eventId: event.id,
        recipient: 'grace@example.com',
        subject: email?.subject,
        template: 'invite',
        sentAt: clock.now(),
      },
    ]);
    expect(JSON.stringify(store.state)).not.toContain(TOKEN);
    expect(JSON.stringify(store.state)).not.toContain(event.data.token_sealed);
  });

  it('leaves an invitation unprocessed when sending fails, so the redelivery sends it', async () => {
    const event = inviteCreated();
    mailer.failNext = 1;

    await expect(handler.handle(event)).rejects.toThrow('SMTP');
    expect(store.state.processed.size).toBe(0);
    expect(store.state.emailLog).toHaveLength(0);

    expect(await handler.handle(event)).toBe('applied');
    expect(mailer.sent).toHaveLength(1);
  });

  it('refuses a token sealed with another key without revealing it', async () => {
    const event = inviteCreated(randomBytes(32));
    const error = (await handler.handle(event).catch((e: unknown) => e)) as Error;
    expect(error.message).toMatch(/sealed invite token/);
    expect(error.message).not.toContain(event.data.token_sealed);
    expect(mailer.sent).toHaveLength(0);
    expect(store.state.processed.size).toBe(0);
  });
});

describe('device and enrollment events', () => {
  let store: InMemoryNotificationStore;
  let mailer: RecordingMailer;
  let clock: ManualClock;
  let handler: NotificationEventHandler;

  // A trailing slash on the API address: the enroll command in the e-mail must not repeat it.
  beforeEach(() => {
    ({ store, mailer, clock, handler } = setUp('https://api.example.com/'));
  });

  it('turns device.enrolled into one feed item naming the hostname, once per event id', async () => {
    const first = deviceEnrolled('web-01');
    const again = deviceEnrolled('web-01', true);

    expect(await handler.handle(first)).toBe('applied');
    expect(await handler.handle(first)).toBe('duplicate');
    expect(await handler.handle(again)).toBe('applied');

    expect(store.state.feed).toEqual([
      {
        id: first.id,
        orgId: 'org-1',
        type: 'device.enrolled',
        message: 'Device "web-01" was enrolled',
        createdAt: clock.now(),
      },
      {
        id: again.id,
        orgId: 'org-1',
        type: 'device.enrolled',
        message: 'Device "web-01" was enrolled again; its previous device token no longer works',
        createdAt: clock.now(),
      },
    ]);
    expect(mailer.sent).toHaveLength(0);
  });

  it('turns device.disabled into one feed item, once per event id', async () => {
    const event = deviceDisabled('db-02');

    expect(await handler.handle(event)).toBe('applied');
    expect(await handler.handle(event)).toBe('duplicate');

    expect(store.state.feed).toEqual([
      {
        id: event.id,
        orgId: 'org-1',
        type: 'device.disabled',
        message: 'Device "db-02" was disabled',
        createdAt: clock.now(),
      },
    ]);
  });

  it('stores a hostile hostname as one capped line of plain text', async () => {
    const event = deviceEnrolled(`\r\n<b>x</b>\u0000\u001b[31m\u202e${'h'.repeat(1_000)}`);

    await handler.handle(event);

    const [item] = store.state.feed;
    expect(item?.message).toMatch(/^Device "<b>x<\/b>\[31mh+…" was enrolled$/);
    expect(item?.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
    expect(Array.from(item?.message ?? '').length).toBeLessThanOrEqual(255 + 'Device "" was enrolled'.length);
  });

  it('e-mails an enrollment code once per event id, with the opened code and key, and stores neither', async () => {
    const event = codeEmailRequested();

    expect(await handler.handle(event)).toBe('applied');
    expect(await handler.handle(event)).toBe('duplicate');

    expect(mailer.sent).toHaveLength(1);
    const [email] = mailer.sent;
    expect(email?.to).toBe('ops@example.com');
    expect(email?.subject).toBe('Install the Security Telemetry agent for Acme <Labs>');
    expect(email?.text).toContain(
      `agent enroll --server https://api.example.com --key ${ENROLLMENT_KEY} --code ${CODE}`,
    );
    expect(email?.text).toContain('It expires at 2026-03-02 10:00 UTC and works once');
    expect(email?.html).toContain('Acme &lt;Labs&gt;');
    expect(store.state.emailLog).toEqual([
      {
        eventId: event.id,
        recipient: 'ops@example.com',
        subject: email?.subject,
        template: 'enrollment_code',
        sentAt: clock.now(),
      },
    ]);
    expect(store.state.feed).toHaveLength(0);
    const stored = JSON.stringify([...store.state.processed, store.state.emailLog, store.state.feed]);
    for (const secret of [CODE, ENROLLMENT_KEY, event.data.code_sealed, event.data.enrollment_key_sealed]) {
      expect(stored).not.toContain(secret);
    }
  });

  it('leaves an enrollment e-mail unprocessed when sending fails, so the redelivery sends it', async () => {
    const event = codeEmailRequested();
    mailer.failNext = 1;

    await expect(handler.handle(event)).rejects.toThrow('SMTP');
    expect(store.state.processed.size).toBe(0);
    expect(store.state.emailLog).toHaveLength(0);

    expect(await handler.handle(event)).toBe('applied');
    expect(mailer.sent).toHaveLength(1);
  });

  it('refuses secrets sealed with another key or for another purpose, without revealing them', async () => {
    const wrongKey = codeEmailRequested(randomBytes(32));
    const error = (await handler.handle(wrongKey).catch((e: unknown) => e)) as Error;
    expect(error.message).toMatch(/sealed enrollment code/);
    expect(error.message).not.toContain(wrongKey.data.code_sealed);

    // The code and the key sealed under each other's context: the binding refuses the swap.
    const swapped = codeEmailRequested(key, {
      code: SEALING_CONTEXTS.enrollmentKey(CODE_RECIPIENT),
      key: SEALING_CONTEXTS.enrollmentCode(CODE_RECIPIENT),
    });
    await expect(handler.handle(swapped)).rejects.toThrow(/sealed enrollment code/);
    const inviteContext = codeEmailRequested(key, {
      code: SEALING_CONTEXTS.enrollmentCode(CODE_RECIPIENT),
      key: SEALING_CONTEXTS.inviteToken({ org_id: 'org-1', email: 'ops@example.com', invite_id: 'r1' }),
    });
    await expect(handler.handle(inviteContext)).rejects.toThrow(/sealed enrollment key/);

    expect(mailer.sent).toHaveLength(0);
    expect(store.state.processed.size).toBe(0);
  });
});

describe('event narrowing', () => {
  it('narrows data by type', () => {
    const event: NotificationEvent = memberJoined();
    if (event.type === 'member.joined') expect(event.data.role).toBe('ANALYST');
  });
});

describe('alert deliveries of threats, and what else users see of events', () => {
  const endpointOf = (id: string, orgId: string) => ({
    id,
    orgId,
    url: `https://${id}.example/`,
    description: null,
    createdAt: new Date('2026-03-01T09:00:00.000Z'),
    secretSealed: 's',
    previousSecretSealed: null,
    previousSecretExpiresAt: null,
    disabledAt: null,
  });
  const threatIn = (orgId: string) =>
    newEnvelope('threat.detected', {
      org_id: orgId,
      device_id: 'd1',
      hostname: 'kiosk',
      dangerous_blocks: 5,
      window_minutes: 10,
      detected_at: '2026-03-01T10:00:00.000Z',
    });

  let store: InMemoryNotificationStore;
  let handler: NotificationEventHandler;
  let woken: number;

  beforeEach(() => {
    store = new InMemoryNotificationStore();
    woken = 0;
    handler = new NotificationEventHandler(
      store,
      new RecordingMailer(),
      { emailsOf: async () => [] },
      new ManualClock(),
      { sealingKey: key, publicAppUrl: 'http://localhost:8080', publicApiUrl: 'https://api.example.com' },
      () => woken++,
    );
    store.state.alertEndpoints.push(endpointOf('e1', 'org-1'), endpointOf('e2', 'org-2'));
  });

  it('schedules deliveries for a threat the first time only, and wakes the worker only when it scheduled some', async () => {
    const threat = threatIn('org-1');

    expect(await handler.handle(threat)).toBe('applied');
    expect(store.state.alertDeliveries.map((d) => d.endpointId)).toEqual(['e1']);
    expect(woken).toBe(1);

    // The redelivered event schedules nothing and wakes no one.
    expect(await handler.handle(threat)).toBe('duplicate');
    expect(store.state.alertDeliveries).toHaveLength(1);
    expect(woken).toBe(1);

    // A threat in an organization without endpoints, and other feed events, schedule nothing.
    expect(await handler.handle(threatIn('org-3'))).toBe('applied');
    expect(await handler.handleFeedBatch([memberJoined(), deviceEnrolled(), deviceDisabled()])).toEqual([
      { outcome: 'applied' },
      { outcome: 'applied' },
      { outcome: 'applied' },
    ]);
    expect(store.state.alertDeliveries).toHaveLength(1);
    expect(woken).toBe(1);
  });

  it('names a member who has no name "A new member"', async () => {
    const event = newEnvelope('member.joined', { ...memberJoined().data, name: '' });
    await handler.handle(event);
    expect(store.state.feed.map((item) => item.message)).toEqual([
      'A new member (ada@example.com) joined as ANALYST',
    ]);
  });

  it('keeps why a sealed secret could not be opened as the cause of the refusal', async () => {
    const error = (await handler.handle(inviteCreated(randomBytes(32))).catch((e: unknown) => e)) as Error;
    expect(error.name).toBe('UnprocessableEventError');
    expect(error.cause).toBeDefined();
  });
});
