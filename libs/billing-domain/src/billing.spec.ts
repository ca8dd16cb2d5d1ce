import { newEnvelope } from '@sts/events/event-envelope';
import { BillingEventHandler } from './billing-events';
import { EVALUATION_PERIOD_DAYS, initialLicense } from './billing-model';
import { BillingService } from './billing-service';
import { InMemoryBillingStore, ManualClock } from './test/in-memory-billing-store';

const orgCreated = (orgId: string, createdAt: string) =>
  newEnvelope('org.created', { org_id: orgId, name: 'Acme', domain: null, created_at: createdAt });

describe('initial license', () => {
  it('is pending, plan none, monthly, with a 14-day evaluation window', () => {
    const createdAt = new Date('2026-03-01T00:00:00.000Z');
    expect(initialLicense('o1', createdAt)).toEqual({
      orgId: 'o1',
      plan: 'none',
      status: 'pending',
      billingCycle: 'monthly',
      expiresAt: new Date('2026-03-15T00:00:00.000Z'),
      createdAt,
      updatedAt: createdAt,
      subscriptionId: null,
      subscriptionStatus: null,
      cancelAtPeriodEnd: false,
      factsAsOf: null,
    });
    expect(EVALUATION_PERIOD_DAYS).toBe(14);
  });
});

describe('billing', () => {
  let store: InMemoryBillingStore;
  let clock: ManualClock;
  let service: BillingService;
  let events: BillingEventHandler;

  beforeEach(() => {
    store = new InMemoryBillingStore();
    clock = new ManualClock();
    service = new BillingService(store, clock, null, { publicAppUrl: 'https://app.example.test' });
    events = new BillingEventHandler(store);
  });

  it('creates the license on org.created, once per event, starting the window at the org creation', async () => {
    const event = orgCreated('o1', '2026-02-20T08:00:00.000Z');

    expect(await events.handle(event)).toBe('applied');
    expect(await events.handle(event)).toBe('duplicate');

    expect(await service.getLicense('o1')).toEqual(
      initialLicense('o1', new Date('2026-02-20T08:00:00.000Z')),
    );
    expect(store.state.licenses.size).toBe(1);
  });

  it('creates the initial license on read when the event has not arrived, and the later event keeps it', async () => {
    const first = await service.getLicense('o2');
    expect(first).toEqual(initialLicense('o2', clock.now()));

    clock.advance(60_000);
    expect(await events.handle(orgCreated('o2', '2026-03-01T11:59:00.000Z'))).toBe('applied');
    expect(await service.getLicense('o2')).toEqual(first);
  });

  it('never replaces an existing license with a second org.created', async () => {
    await events.handle(orgCreated('o3', '2026-03-01T00:00:00.000Z'));
    const before = await service.getLicense('o3');
    await events.handle(orgCreated('o3', '2026-04-01T00:00:00.000Z'));
    expect(await service.getLicense('o3')).toEqual(before);
  });
});
