import Stripe from 'stripe';
import { failureOf } from '@sts/testing/failure-of';
import { isUuid } from '@sts/vocabulary/identifiers';
import {
  parseStripeForm,
  signStripePayload,
  startStripeStandIn,
  stripeEvent,
  type StripeStandIn,
} from './stripe-stand-in';

const unix = (date: Date) => Math.floor(date.getTime() / 1000);

describe('Stripe stand-in, driven by the official stripe package', () => {
  let standIn: StripeStandIn;
  let stripe: Stripe;

  beforeAll(async () => {
    standIn = await startStripeStandIn();
    stripe = new Stripe(standIn.apiKey, {
      host: '127.0.0.1',
      port: standIn.port,
      protocol: 'http',
      maxNetworkRetries: 0,
    });
  });

  afterAll(async () => {
    await standIn.close();
  });

  afterEach(() => standIn.failRequests('none'));

  const newCustomer = () =>
    stripe.customers.create({ email: 'owner@example.com', metadata: { org_id: 'org-1' } });

  it('decodes Stripe bracket syntax into nested objects and arrays', () => {
    expect(
      parseStripeForm(
        'line_items[0][price]=price_1&line_items[0][quantity]=2&line_items[1][price]=price_2' +
          '&metadata[org_id]=org%201&lookup_keys[0]=pro_monthly&lookup_keys[1]=pro_annual' +
          '&expand[]=subscription&expand[]=customer&mode=subscription&__proto__[x]=1',
      ),
    ).toEqual({
      line_items: [{ price: 'price_1', quantity: '2' }, { price: 'price_2' }],
      metadata: { org_id: 'org 1' },
      lookup_keys: ['pro_monthly', 'pro_annual'],
      expand: ['subscription', 'customer'],
      mode: 'subscription',
    });
  });

  it('creates and retrieves a customer; an idempotency key replays the first answer', async () => {
    const first = await stripe.customers.create(
      { email: 'owner@example.com', name: 'Owner', metadata: { org_id: 'org-1' } },
      { idempotencyKey: 'customer-org-1' },
    );
    const replay = await stripe.customers.create(
      { email: 'owner@example.com', name: 'Owner', metadata: { org_id: 'org-1' } },
      { idempotencyKey: 'customer-org-1' },
    );

    expect(first.id).toMatch(/^cus_[A-Za-z0-9]{24}$/);
    expect(replay.id).toBe(first.id);
    expect(replay.lastResponse.headers['idempotent-replayed']).toBe('true');
    expect(first).toMatchObject({
      object: 'customer',
      email: 'owner@example.com',
      metadata: { org_id: 'org-1' },
    });
    expect([...standIn.customers.values()].filter((c) => c.metadata.org_id === 'org-1')).toHaveLength(1);
    expect(standIn.requests.at(-1)).toEqual({
      method: 'POST',
      path: '/v1/customers',
      params: { email: 'owner@example.com', name: 'Owner', metadata: { org_id: 'org-1' } },
      idempotencyKey: 'customer-org-1',
    });

    const retrieved = await stripe.customers.retrieve(first.id);
    expect(retrieved).toMatchObject({ id: first.id, email: 'owner@example.com', name: 'Owner' });

    const reuse = await failureOf(
      stripe.customers.create({ email: 'other@example.com' }, { idempotencyKey: 'customer-org-1' }),
    );
    expect(reuse).toBeInstanceOf(Stripe.errors.StripeIdempotencyError);
  });

  it('keys every POST itself when the caller gives no idempotency key', async () => {
    await stripe.customers.create({ email: 'x@example.com' });
    const key = standIn.requests.at(-1)?.idempotencyKey ?? '';
    expect(key).toMatch(/^stripe-node-retry-/);
    expect(isUuid(key.slice('stripe-node-retry-'.length))).toBe(true);
  });

  it('lists seeded prices by lookup key and activity', async () => {
    const prices = await stripe.prices.list({ lookup_keys: ['pro_monthly', 'basic_annual'], active: true });

    expect(standIn.requests.at(-1)?.params).toEqual({
      lookup_keys: ['pro_monthly', 'basic_annual'],
      active: 'true',
    });
    expect(prices.object).toBe('list');
    expect(prices.has_more).toBe(false);
    expect(prices.url).toBe('/v1/prices');
    const byKey = new Map(prices.data.map((price) => [price.lookup_key, price]));
    expect([...byKey.keys()].sort()).toEqual(['basic_annual', 'pro_monthly']);
    expect(byKey.get('pro_monthly')).toMatchObject({
      object: 'price',
      active: true,
      currency: 'usd',
      unit_amount: 2900,
      recurring: { interval: 'month' },
      type: 'recurring',
    });
    expect(byKey.get('basic_annual')?.recurring?.interval).toBe('year');
    expect(byKey.get('pro_monthly')?.id).toMatch(/^price_/);
    expect(byKey.get('pro_monthly')?.product).toMatch(/^prod_/);

    const all = await stripe.prices.list({ active: true, limit: 100 });
    expect(all.data.map((price) => price.lookup_key).sort()).toEqual([
      'basic_annual',
      'basic_monthly',
      'enterprise_annual',
      'enterprise_monthly',
      'pro_annual',
      'pro_monthly',
    ]);
    expect((await stripe.prices.list({ active: false })).data).toEqual([]);
  });

  it('runs checkout to a subscription whose item carries the period and the price', async () => {
    const customer = await newCustomer();
    const price = standIn.price('pro_monthly');
    const session = await stripe.checkout.sessions.create({
      customer: customer.id,
      mode: 'subscription',
      line_items: [{ price: price.id, quantity: 1 }],
      client_reference_id: 'org-1',
      metadata: { org_id: 'org-1' },
      subscription_data: { metadata: { org_id: 'org-1' } },
      success_url: 'https://app.example.com/billing?done=1',
      cancel_url: 'https://app.example.com/billing',
    });

    expect(standIn.requests.at(-1)?.params).toMatchObject({
      line_items: [{ price: price.id, quantity: '1' }],
      subscription_data: { metadata: { org_id: 'org-1' } },
    });
    expect(session).toMatchObject({
      object: 'checkout.session',
      url: `${standIn.url}/checkout/${session.id}`,
      mode: 'subscription',
      customer: customer.id,
      client_reference_id: 'org-1',
      metadata: { org_id: 'org-1' },
      status: 'open',
      subscription: null,
      success_url: 'https://app.example.com/billing?done=1',
      cancel_url: 'https://app.example.com/billing',
    });
    expect(session.id).toMatch(/^cs_test_/);

    const periodEnd = new Date('2031-05-01T00:00:00.000Z');
    const completed = standIn.completeCheckout(session.id, { currentPeriodEnd: periodEnd });
    expect(completed.session).toMatchObject({ status: 'complete', subscription: completed.subscription.id });

    const subscription = await stripe.subscriptions.retrieve(completed.subscription.id);
    expect(subscription).toMatchObject({
      object: 'subscription',
      customer: customer.id,
      status: 'active',
      cancel_at_period_end: false,
      metadata: { org_id: 'org-1' },
    });
    const item = subscription.items.data[0];
    expect(item?.id).toMatch(/^si_/);
    expect(item?.current_period_end).toBe(unix(periodEnd));
    expect(item?.price.lookup_key).toBe('pro_monthly');
    expect(item?.price.recurring?.interval).toBe('month');

    const retrievedSession = await stripe.checkout.sessions.retrieve(session.id, {
      expand: ['subscription'],
    });
    expect(standIn.requests.at(-1)?.params).toEqual({ expand: ['subscription'] });
    expect(retrievedSession.status).toBe('complete');
    expect((retrievedSession.subscription as Stripe.Subscription | null)?.id).toBe(subscription.id);

    const changed = standIn.updateSubscription(subscription.id, {
      lookupKey: 'enterprise_annual',
      cancelAtPeriodEnd: true,
    });
    expect(changed.items.data[0]?.price.lookup_key).toBe('enterprise_annual');
    const afterChange = await stripe.subscriptions.retrieve(subscription.id);
    expect(afterChange.cancel_at_period_end).toBe(true);
    expect(afterChange.items.data[0]?.price.recurring?.interval).toBe('year');
    expect(afterChange.items.data[0]?.current_period_end).toBe(unix(periodEnd));

    standIn.deleteSubscription(subscription.id);
    expect((await stripe.subscriptions.retrieve(subscription.id)).status).toBe('canceled');
  });

  it('serves invoices that name their subscription under parent.subscription_details', async () => {
    const customer = await newCustomer();
    const session = await stripe.checkout.sessions.create({
      customer: customer.id,
      mode: 'subscription',
      line_items: [{ price: standIn.price('basic_monthly').id, quantity: 1 }],
    });
    const { subscription } = standIn.completeCheckout(session.id);
    const created = standIn.createInvoice(subscription.id, { paid: false });

    const invoice = await stripe.invoices.retrieve(created.id);
    expect(invoice).toMatchObject({
      id: created.id,
      object: 'invoice',
      customer: customer.id,
      status: 'open',
      amount_due: 900,
      currency: 'usd',
      attempt_count: 1,
      hosted_invoice_url: `${standIn.url}/invoice/${created.id}`,
      period_end: subscription.items.data[0]?.current_period_end,
    });
    expect(invoice.parent?.subscription_details?.subscription).toBe(subscription.id);
    expect(invoice.next_payment_attempt).toBeGreaterThan(unix(new Date()));
    expect((await stripe.subscriptions.retrieve(subscription.id)).latest_invoice).toBe(created.id);
  });

  it('creates billing portal sessions for existing customers only', async () => {
    const customer = await newCustomer();
    const portal = await stripe.billingPortal.sessions.create({
      customer: customer.id,
      return_url: 'https://app.example.com/billing',
    });
    expect(portal).toMatchObject({
      object: 'billing_portal.session',
      url: `${standIn.url}/portal/${portal.id}`,
      customer: customer.id,
      return_url: 'https://app.example.com/billing',
    });
    expect(portal.id).toMatch(/^bps_/);

    const missing = await failureOf(stripe.billingPortal.sessions.create({ customer: 'cus_missing' }));
    expect(missing).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect(missing).toMatchObject({ statusCode: 400, code: 'resource_missing', param: 'customer' });
  });

  it('answers unknown ids and routes with Stripe errors the SDK understands', async () => {
    const error = await failureOf(stripe.subscriptions.retrieve('sub_missing'));
    expect(error).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect(error).toMatchObject({
      statusCode: 404,
      code: 'resource_missing',
      param: 'id',
      message: "No such subscription: 'sub_missing'",
      rawType: 'invalid_request_error',
    });

    const checkout = await failureOf(
      stripe.checkout.sessions.create({
        customer: (await newCustomer()).id,
        mode: 'subscription',
        line_items: [{ price: 'price_missing', quantity: 1 }],
      }),
    );
    expect(checkout).toMatchObject({
      statusCode: 400,
      code: 'resource_missing',
      param: 'line_items[0][price]',
    });

    const response = await fetch(`${standIn.url}/v1/nothing`, {
      headers: { authorization: `Bearer ${standIn.apiKey}` },
    });
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({
      error: {
        type: 'invalid_request_error',
        message: expect.stringContaining('Unrecognized request URL (GET: /v1/nothing)'),
      },
    });
  });

  it('refuses a wrong secret key with 401', async () => {
    const wrongKey = new Stripe('sk_test_wrong_key_1234', {
      host: '127.0.0.1',
      port: standIn.port,
      protocol: 'http',
      maxNetworkRetries: 0,
    });
    const error = await failureOf(wrongKey.customers.create({ email: 'x@example.com' }));
    expect(error).toBeInstanceOf(Stripe.errors.StripeAuthenticationError);
    expect(error).toMatchObject({
      statusCode: 401,
      message: expect.stringMatching(/^Invalid API Key provided/),
    });
  });

  it('fails on demand: 500 api_error, then a dropped connection', async () => {
    standIn.failRequests('error');
    const apiError = await failureOf(stripe.customers.create({ email: 'x@example.com' }));
    expect(apiError).toBeInstanceOf(Stripe.errors.StripeAPIError);
    expect(apiError).toMatchObject({ statusCode: 500, rawType: 'api_error' });

    standIn.failRequests('unreachable');
    const before = standIn.requests.length;
    const connection = await failureOf(stripe.customers.create({ email: 'x@example.com' }));
    expect(connection).toBeInstanceOf(Stripe.errors.StripeConnectionError);
    // A reset connection is retried once even with maxNetworkRetries: 0, under the same idempotency key.
    const attempts = standIn.requests.slice(before);
    expect(attempts).toHaveLength(2);
    expect(attempts[1]?.idempotencyKey).toBe(attempts[0]?.idempotencyKey);

    standIn.failRequests('none');
    expect((await stripe.customers.create({ email: 'x@example.com' })).id).toMatch(/^cus_/);
  });

  describe('webhooks', () => {
    const secret = 'whsec_standin_test';

    it('builds events the way Stripe does and signs them so constructEvent accepts them', () => {
      const subscription = { id: 'sub_123', object: 'subscription', status: 'active' };
      const event = standIn.event('customer.subscription.updated', subscription, {
        id: 'evt_fixed',
        created: new Date('2030-01-01T00:00:00.000Z'),
      });
      expect(event).toEqual({
        id: 'evt_fixed',
        object: 'event',
        api_version: '2026-10-28.endive',
        created: unix(new Date('2030-01-01T00:00:00.000Z')),
        data: { object: subscription },
        livemode: false,
        pending_webhooks: 1,
        request: { id: null, idempotency_key: null },
        type: 'customer.subscription.updated',
      });

      const { payload, signature } = standIn.signed(event, secret);
      expect(signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      const verified = stripe.webhooks.constructEvent(payload, signature, secret);
      expect(verified.id).toBe('evt_fixed');
      expect(verified.type).toBe('customer.subscription.updated');
      expect((verified.data.object as { id: string }).id).toBe('sub_123');
    });

    it('rejects a tampered payload, a stale timestamp and a wrong secret', () => {
      const event = stripeEvent('invoice.paid', { id: 'in_1', object: 'invoice' });
      expect(event.id).toMatch(/^evt_/);
      const { payload, signature } = signStripePayload(event, secret);

      const tampered = payload.replace('in_1', 'in_2');
      expect(tampered).not.toBe(payload);
      expect(() => stripe.webhooks.constructEvent(tampered, signature, secret)).toThrow(
        Stripe.errors.StripeSignatureVerificationError,
      );

      const stale = signStripePayload(event, secret, { timestamp: unix(new Date()) - 301 });
      expect(() => stripe.webhooks.constructEvent(stale.payload, stale.signature, secret)).toThrow(
        Stripe.errors.StripeSignatureVerificationError,
      );
      const recent = signStripePayload(event, secret, { timestamp: unix(new Date()) - 200 });
      expect(stripe.webhooks.constructEvent(recent.payload, recent.signature, secret).id).toBe(event.id);

      expect(() => stripe.webhooks.constructEvent(payload, signature, 'whsec_other')).toThrow(
        Stripe.errors.StripeSignatureVerificationError,
      );
    });

    it('signs a raw string payload as given', () => {
      const raw = '{"id":"evt_raw","object":"event"}';
      const { payload, signature } = signStripePayload(raw, secret, { timestamp: unix(new Date()) });
      expect(payload).toBe(raw);
      expect(stripe.webhooks.constructEvent(payload, signature, secret).id).toBe('evt_raw');
    });
  });
});
