import { AppError } from '@sts/errors/app-error';
import { BillingService } from './billing-service';
import type { SubscriptionFacts } from './license-transitions';
import { PaymentEventHandler, type PaymentEvent } from './payment-events';
import { FakePaymentProvider } from './test/fake-payment-provider';
import { InMemoryBillingStore, ManualClock } from './test/in-memory-billing-store';

const codeOf = (error: unknown) => (error instanceof AppError ? error.code : String(error));

describe('checkout and portal', () => {
  let store: InMemoryBillingStore;
  let provider: FakePaymentProvider;
  let service: BillingService;

  beforeEach(() => {
    store = new InMemoryBillingStore();
    provider = new FakePaymentProvider();
    service = new BillingService(store, new ManualClock(), provider, { publicAppUrl: 'https://app.test/' });
  });

  const checkout = (orgId = 'o1') =>
    service.startCheckout({ orgId, plan: 'pro', cycle: 'annual', requestedByEmail: 'admin@o1.test' });

  it('creates the customer once, moves the license to onboarding once, and closes the previous session', async () => {
    const first = await checkout();
    const second = await checkout();
    expect(provider.customers.size).toBe(1);
    expect(store.state.licenses.get('o1')?.status).toBe('onboarding');
    expect(store.emittedOf('billing.updated').map((data) => data.summary)).toEqual([
      'Checkout started: Pro, billed yearly',
    ]);
    const firstId = first.split('/').pop()!;
    const secondId = second.split('/').pop()!;
    expect(provider.sessions.get(firstId)?.status).toBe('closed');
    expect(provider.sessions.get(secondId)?.status).toBe('open');
    expect(store.state.accounts.get('o1')?.checkoutSessionId).toBe(secondId);
  });

  it('refuses while the last session is paid but not yet activated, and when the license is active', async () => {
    const url = await checkout();
    provider.sessions.get(url.split('/').pop()!)!.status = 'paid';
    expect(codeOf(await checkout().catch((e: unknown) => e))).toBe('SUBSCRIPTION_ALREADY_ACTIVE');
    store.state.licenses.get('o1')!.status = 'active';
    expect(codeOf(await checkout().catch((e: unknown) => e))).toBe('SUBSCRIPTION_ALREADY_ACTIVE');
  });

  it('closes its own session when the license became active meanwhile', async () => {
    await service.getLicense('o1');
    provider.onCheckout = async () => {
      store.state.licenses.get('o1')!.status = 'active';
    };
    expect(codeOf(await checkout().catch((e: unknown) => e))).toBe('SUBSCRIPTION_ALREADY_ACTIVE');
    expect([...provider.sessions.values()].map((session) => session.status)).toEqual(['closed']);
    expect(store.emittedOf('billing.updated')).toEqual([]);
  });

  it('changes nothing when the provider fails', async () => {
    provider.down = true;
    expect(codeOf(await checkout().catch((e: unknown) => e))).toBe('PAYMENT_PROVIDER_UNAVAILABLE');
    expect(store.state.licenses.get('o1')?.status).toBe('pending');
    expect(store.state.accounts.size).toBe(0);
    expect(store.state.emitted).toEqual([]);
  });

  it('opens the portal only for an organization that checked out', async () => {
    const notFound = await service.openPortal('o1').catch((e: unknown) => e);
    expect(codeOf(notFound)).toBe('BILLING_ACCOUNT_NOT_FOUND');
    expect((notFound as AppError).message).toBe('The organization never started a checkout');
    await checkout();
    expect(await service.openPortal('o1')).toBe('https://portal.test/cus_1');
  });

  it('refuses an active license before asking the provider anything, naming its subscription', async () => {
    await checkout();
    const sessionsBefore = structuredClone([...provider.sessions]);
    Object.assign(store.state.licenses.get('o1')!, { status: 'active', plan: 'pro', billingCycle: 'annual' });
    const refused = await checkout().catch((e: unknown) => e);
    expect(codeOf(refused)).toBe('SUBSCRIPTION_ALREADY_ACTIVE');
    expect((refused as AppError).message).toBe(
      'The organization has an active Pro, billed yearly subscription',
    );
    expect([...provider.sessions]).toEqual(sessionsBefore);
  });

  it('lets a canceled license check out again although its last session was paid (that session is history)', async () => {
    const url = await checkout();
    provider.sessions.get(url.split('/').pop()!)!.status = 'paid';
    const refused = await checkout().catch((e: unknown) => e);
    expect((refused as AppError).message).toBe(
      "The organization's last checkout was paid; its subscription is being activated",
    );
    store.state.licenses.get('o1')!.status = 'canceled';
    expect(await checkout()).toMatch(/^https:\/\/checkout\.test\//);
    expect(store.state.licenses.get('o1')?.status).toBe('onboarding');
  });

  it("sends people back to the dashboard's billing page from checkout and portal", async () => {
    const createCheckoutSession = jest.spyOn(provider, 'createCheckoutSession');
    const createPortalSession = jest.spyOn(provider, 'createPortalSession');
    await checkout();
    await service.openPortal('o1');
    expect(createCheckoutSession).toHaveBeenCalledWith(
      expect.objectContaining({
        successUrl: 'https://app.test/billing?checkout=success',
        cancelUrl: 'https://app.test/billing?checkout=canceled',
      }),
    );
    expect(createPortalSession).toHaveBeenCalledWith({
      customerId: 'cus_1',
      returnUrl: 'https://app.test/billing',
    });
  });

  it('leaves only the newest session open when two checkouts run at once', async () => {
    await Promise.all([checkout(), checkout()]);
    const open = [...provider.sessions].filter(([, session]) => session.status === 'open').map(([id]) => id);
    expect(open).toEqual([store.state.accounts.get('o1')?.checkoutSessionId]);
  });

  it('answers BILLING_NOT_CONFIGURED without a provider', async () => {
    const unconfigured = new BillingService(store, new ManualClock(), null, {
      publicAppUrl: 'https://app.test',
    });
    const unavailable = await unconfigured.openPortal('o1').catch((e: unknown) => e);
    expect(codeOf(unavailable)).toBe('BILLING_NOT_CONFIGURED');
    expect((unavailable as AppError).message).toBe('Billing is not configured on this deployment');
    const handler = new PaymentEventHandler(store, null, new ManualClock());
    expect(codeOf(await handler.handle(Buffer.from('{}'), 'ok').catch((e: unknown) => e))).toBe(
      'BILLING_NOT_CONFIGURED',
    );
  });
});

describe('payment events', () => {
  let store: InMemoryBillingStore;
  let provider: FakePaymentProvider;
  let handler: PaymentEventHandler;
  let customerId: string;
  const facts = (extra: Partial<SubscriptionFacts> = {}): SubscriptionFacts => ({
    id: 'sub_1',
    status: 'active',
    plan: 'pro',
    cycle: 'monthly',
    currentPeriodEnd: new Date('2027-01-01T00:00:00Z'),
    endsAt: null,
    ...extra,
  });
  let sequence = 0;
  const deliver = (event: Record<string, unknown>) => {
    const full = {
      id: `evt_${++sequence}`,
      created: new Date('2026-11-25T12:00:00Z'),
      ...event,
    } as PaymentEvent;
    return handler.handle(provider.payloadOf(full), 'ok');
  };

  beforeEach(async () => {
    store = new InMemoryBillingStore();
    provider = new FakePaymentProvider();
    const clock = new ManualClock();
    await new BillingService(store, clock, provider, { publicAppUrl: 'https://app.test' }).startCheckout({
      orgId: 'o1',
      plan: 'pro',
      cycle: 'monthly',
      requestedByEmail: null,
    });
    customerId = store.state.accounts.get('o1')!.customerId;
    provider.subscriptions.set('sub_1', { id: 'sub_1', customerId, facts: facts() });
    handler = new PaymentEventHandler(store, provider, clock);
  });

  it('activates once per event id', async () => {
    const event = {
      id: 'evt_checkout',
      type: 'checkout.session.completed',
      customerId,
      subscriptionId: 'sub_1',
      created: new Date('2026-11-25T12:00:00Z'),
    } as PaymentEvent;
    expect(await handler.handle(provider.payloadOf(event), 'ok')).toEqual({
      outcome: 'applied',
      orgId: 'o1',
    });
    expect(await handler.handle(provider.payloadOf(event), 'ok')).toEqual({
      outcome: 'duplicate',
      orgId: 'o1',
    });
    expect(store.state.licenses.get('o1')).toMatchObject({
      status: 'active',
      plan: 'pro',
      subscriptionId: 'sub_1',
    });
    expect(store.emittedOf('billing.updated')).toHaveLength(2);
  });

  it('ignores events of unknown customers and subscriptions of other customers', async () => {
    provider.subscriptions.set('sub_other', {
      id: 'sub_other',
      customerId: 'cus_other',
      facts: facts({ id: 'sub_other' }),
    });
    expect(
      await deliver({
        type: 'checkout.session.completed',
        customerId: 'cus_nobody',
        subscriptionId: 'sub_1',
      }),
    ).toMatchObject({
      outcome: 'ignored',
      orgId: null,
    });
    expect(
      await deliver({ type: 'checkout.session.completed', customerId, subscriptionId: 'sub_other' }),
    ).toMatchObject({
      outcome: 'ignored',
      orgId: 'o1',
    });
    expect(store.state.licenses.get('o1')?.status).toBe('onboarding');
  });

  it('records nothing when the provider cannot be reached, and applies the event when it comes again', async () => {
    const event = {
      id: 'evt_retry',
      type: 'checkout.session.completed',
      customerId,
      subscriptionId: 'sub_1',
      created: new Date('2026-11-25T12:00:00Z'),
    } as PaymentEvent;
    provider.down = true;
    expect(codeOf(await handler.handle(provider.payloadOf(event), 'ok').catch((e: unknown) => e))).toBe(
      'PAYMENT_PROVIDER_UNAVAILABLE',
    );
    expect(store.state.paymentEvents.size).toBe(0);
    provider.down = false;
    expect(await handler.handle(provider.payloadOf(event), 'ok')).toEqual({
      outcome: 'applied',
      orgId: 'o1',
    });
  });

  it('tells of a failed payment through billing.updated and billing.payment_failed, and changes nothing', async () => {
    const before = structuredClone(store.state.licenses.get('o1'));
    expect(
      await deliver({
        type: 'invoice.payment_failed',
        customerId,
        subscriptionId: null,
        invoice: { amountDue: 2900, currency: 'usd', url: 'https://pay.test/in_1', nextAttemptAt: null },
      }),
    ).toEqual({ outcome: 'applied', orgId: 'o1' });
    expect(store.state.licenses.get('o1')).toEqual(before);
    expect(store.emittedOf('billing.updated').at(-1)?.summary).toBe(
      'Payment of $29.00 failed; update the payment method in the billing portal',
    );
    expect(store.emittedOf('billing.payment_failed')).toEqual([
      {
        org_id: 'o1',
        amount_due: 2900,
        currency: 'usd',
        invoice_url: 'https://pay.test/in_1',
        next_attempt_at: null,
        failed_at: '2026-11-25T12:00:00.000Z',
      },
    ]);
  });

  it('follows an unpaid or paused subscription: out of service, checkout refused while unpaid, allowed while paused', async () => {
    const service = new BillingService(store, new ManualClock(), provider, {
      publicAppUrl: 'https://app.test',
    });
    const checkout = () =>
      service.startCheckout({ orgId: 'o1', plan: 'pro', cycle: 'monthly', requestedByEmail: null });
    let minute = 0;
    const becomes = (status: SubscriptionFacts['status']) =>
      deliver({
        type: 'customer.subscription.updated',
        customerId,
        subscription: { id: 'sub_1', customerId, facts: facts({ status }) },
        created: new Date(Date.UTC(2026, 10, 25, 13, ++minute)),
      });
    await deliver({ type: 'checkout.session.completed', customerId, subscriptionId: 'sub_1' });
    expect(store.state.licenses.get('o1')?.status).toBe('active');

    expect(await becomes('unpaid')).toEqual({ outcome: 'applied', orgId: 'o1' });
    expect(store.state.licenses.get('o1')?.status).toBe('canceled');
    expect(store.emittedOf('billing.updated').at(-1)).toMatchObject({
      status: 'canceled',
      summary:
        'Subscription suspended: Pro, billed monthly is unpaid; pay the open invoice in the billing portal',
    });
    // The unpaid subscription still exists and bills: a second one is not sold next to it.
    const refused = await checkout().catch((e: unknown) => e);
    expect(codeOf(refused)).toBe('SUBSCRIPTION_ALREADY_ACTIVE');
    expect((refused as AppError).message).toContain('unpaid; pay its open invoice in the billing portal');

    await becomes('active');
    expect(store.state.licenses.get('o1')?.status).toBe('active');
    expect(codeOf(await checkout().catch((e: unknown) => e))).toBe('SUBSCRIPTION_ALREADY_ACTIVE');

    await becomes('paused');
    expect(store.state.licenses.get('o1')?.status).toBe('canceled');
    // A paused subscription bills nothing: the organization may check out anew.
    expect(await checkout()).toMatch(/^https:\/\/checkout\.test\//);
    expect(store.state.licenses.get('o1')?.status).toBe('onboarding');
  });

  it.each([
    [
      'a type billing does not act on',
      () => ({ type: 'other', providerType: 'charge.refunded' }),
      null,
      'charge.refunded is not an event billing acts on',
    ],
    [
      'a customer of no organization',
      () => ({ type: 'checkout.session.completed', customerId: 'cus_nobody', subscriptionId: 'sub_1' }),
      null,
      'customer cus_nobody belongs to no organization',
    ],
    [
      'a checkout without a subscription',
      (customer: string) => ({
        type: 'checkout.session.completed',
        customerId: customer,
        subscriptionId: null,
      }),
      'o1',
      'checkout.session.completed without a subscription',
    ],
    [
      'a payment of a subscription the provider does not have',
      (customer: string) => ({
        type: 'invoice.payment_succeeded',
        customerId: customer,
        subscriptionId: 'sub_gone',
      }),
      'o1',
      'subscription sub_gone does not exist',
    ],
    [
      "a payment of another customer's subscription",
      (customer: string) => ({
        type: 'invoice.payment_succeeded',
        customerId: customer,
        subscriptionId: 'sub_other',
      }),
      'o1',
      'subscription sub_other belongs to another customer',
    ],
    [
      'a checkout of a subscription whose price is none of our plans',
      (customer: string) => ({
        type: 'checkout.session.completed',
        customerId: customer,
        subscriptionId: 'sub_noplan',
      }),
      'o1',
      'subscription sub_noplan has a price of no plan',
    ],
    [
      'an update of a subscription whose price is none of our plans',
      (customer: string) => ({
        type: 'customer.subscription.updated',
        customerId: customer,
        subscription: { id: 'sub_noplan', customerId: customer, facts: null },
      }),
      'o1',
      'subscription sub_noplan has a price of no plan',
    ],
  ])('ignores %s, changing nothing', async (_case, event, orgId, reason) => {
    provider.subscriptions.set('sub_other', {
      id: 'sub_other',
      customerId: 'cus_other',
      facts: facts({ id: 'sub_other' }),
    });
    provider.subscriptions.set('sub_noplan', { id: 'sub_noplan', customerId, facts: null });
    const before = structuredClone(store.state);
    expect(await deliver(event(customerId))).toEqual({ outcome: 'ignored', orgId, reason });
    expect(store.state.licenses).toEqual(before.licenses);
    expect(store.state.emitted).toEqual(before.emitted);
  });

  it('answers a replay of a recorded event as a duplicate without asking the provider', async () => {
    const event = { type: 'checkout.session.completed', customerId, subscriptionId: 'sub_1' };
    await deliver({ id: 'evt_once', ...event });
    provider.down = true;
    expect(await deliver({ id: 'evt_once', ...event })).toEqual({ outcome: 'duplicate', orgId: 'o1' });
  });

  it('names the plan of a subscribed organization in the failed payment feed item', async () => {
    provider.subscriptions.set('sub_1', { id: 'sub_1', customerId, facts: facts({ plan: 'enterprise' }) });
    await deliver({ type: 'checkout.session.completed', customerId, subscriptionId: 'sub_1' });
    await deliver({
      type: 'invoice.payment_failed',
      customerId,
      subscriptionId: 'sub_1',
      invoice: { amountDue: 2900, currency: 'usd', url: null, nextAttemptAt: null },
    });
    expect(store.emittedOf('billing.updated').at(-1)?.summary).toBe(
      'Payment of $29.00 for the Enterprise subscription failed; update the payment method in the billing portal',
    );
  });

  it('starts from the initial license when the organization has none stored yet', async () => {
    store.state.licenses.delete('o1');
    expect(
      await deliver({ type: 'checkout.session.completed', customerId, subscriptionId: 'sub_1' }),
    ).toEqual({
      outcome: 'applied',
      orgId: 'o1',
    });
    expect(store.state.licenses.get('o1')).toMatchObject({
      status: 'active',
      plan: 'pro',
      subscriptionId: 'sub_1',
    });
  });

  it('refuses a bad signature before reading anything', async () => {
    expect(codeOf(await handler.handle(Buffer.from('x'), 'bad').catch((e: unknown) => e))).toBe(
      'WEBHOOK_SIGNATURE_INVALID',
    );
  });
});
