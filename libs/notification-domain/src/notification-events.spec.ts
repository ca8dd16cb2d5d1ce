import { randomBytes } from 'node:crypto';
import { sealSecret } from '@sts/crypto/secrets';
import type { DomainEvent } from '@sts/events/event-catalogue';
import { newEnvelope } from '@sts/events/event-envelope';
import { NotificationEventHandler, toNotificationEvent, type NotificationEvent } from './notification-events';
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
    token_sealed: sealSecret(TOKEN, sealingKey, 'invite.created'),
  });

describe('notification event handling', () => {
  let store: InMemoryNotificationStore;
  let mailer: RecordingMailer;
  let clock: ManualClock;
  let handler: NotificationEventHandler;

  beforeEach(() => {
    store = new InMemoryNotificationStore();
    mailer = new RecordingMailer();
    clock = new ManualClock();
    handler = new NotificationEventHandler(store, mailer, clock, { sealingKey: key, publicAppUrl: 'http://localhost:8080' });
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

  it('e-mails an invitation once per event id, with the opened token, and logs no secret', async () => {
    const event = inviteCreated();

    expect(await handler.handle(event)).toBe('applied');
    expect(await handler.handle(event)).toBe('duplicate');

    expect(mailer.sent).toHaveLength(1);
    const [email] = mailer.sent;
    expect(email?.to).toBe('grace@example.com');
    expect(email?.subject).toBe("You're invited to join Acme <Labs> on Security Telemetry");
    expect(email?.text).toContain(`http://localhost:8080/invites/accept?token=${TOKEN}`);
    expect(email?.html).toContain('Acme &lt;Labs&gt;');
    expect(store.state.emailLog).toEqual([
      { eventId: event.id, recipient: 'grace@example.com', subject: email?.subject, template: 'invite', sentAt: clock.now() },
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

describe('event narrowing', () => {
  it('accepts subscribed types with valid data and skips others', () => {
    const joined = memberJoined();
    expect(toNotificationEvent(joined)).toEqual(joined);
    const orgCreated = newEnvelope('org.created', { org_id: 'o', name: 'n', domain: null, created_at: new Date().toISOString() });
    expect(toNotificationEvent(orgCreated)).toBeNull();
    expect(toNotificationEvent({ ...joined, type: 'device.enrolled' })).toBeNull();
  });

  it('rejects subscribed types with invalid data', () => {
    expect(() => toNotificationEvent({ ...memberJoined(), data: { org_id: 1 } })).toThrow();
  });

  it('narrows data by type', () => {
    const event: NotificationEvent = memberJoined();
    if (event.type === 'member.joined') expect(event.data.role).toBe('ANALYST');
  });
});
