import Stripe from 'stripe';
import { SUBSCRIPTION_STATUSES } from '@sts/billing-domain/billing-model';
import { AppError } from '@sts/errors/app-error';
import { createLogger } from '@sts/logger/create-logger';
import { signStripePayload } from '@sts/stand-ins/stripe-stand-in';
import { failureOf } from '@sts/testing/failure-of';
import {
  createStripeClient,
  lookupKeyOf,
  StripePaymentProvider,
  toPaymentEvent,
} from './stripe-payment-provider';
import {
  CANCEL_AT,
  CREATED,
  checkoutSessionObject,
  eventFields,
  eventOf,
  invoiceObject,
  PERIOD_END,
  seconds,
  subscriptionObject,
} from './test/stripe-objects';

// What Stripe sends and what billing makes of it (toPaymentEvent, verifyEvent, the client's settings: no I/O).
// The adapter's calls against the Stripe stand-in are in stripe-payment-provider.int-spec.ts.

const silent = createLogger('stripe-provider-spec', 'silent');

describe('lookupKeyOf', () => {
  it.each([
    ['basic', 'monthly', 'basic_monthly'],
    ['basic', 'annual', 'basic_annual'],
    ['pro', 'monthly', 'pro_monthly'],
    ['pro', 'annual', 'pro_annual'],
    ['enterprise', 'monthly', 'enterprise_monthly'],
    ['enterprise', 'annual', 'enterprise_annual'],
  ] as const)(
    'gives %s, %s the lookup key %s, and a subscription at that price reads back as that plan',
    (plan, cycle, key) => {
      expect(lookupKeyOf(plan, cycle)).toBe(key);
      const event = toPaymentEvent(
        eventOf('customer.subscription.updated', subscriptionObject({}, { price: { lookup_key: key } })),
      );
      expect(event).toMatchObject({ subscription: { facts: { plan, cycle } } });
    },
  );
});

describe('toPaymentEvent: what Stripe sends, reduced to what billing needs', () => {
  describe('checkout.session.completed', () => {
    it('names the customer and the subscription a paid subscription checkout made', () => {
      expect(toPaymentEvent(eventOf('checkout.session.completed', checkoutSessionObject()))).toEqual({
        ...eventFields,
        type: 'checkout.session.completed',
        customerId: 'cus_QxYz2AbCdEfGhIj',
        subscriptionId: 'sub_1QxYz2AbCdEfGhIj',
      });
    });

    it('takes the ids of expanded customer and subscription objects', () => {
      const session = checkoutSessionObject({
        customer: { id: 'cus_Expanded1', object: 'customer', email: 'a@b.test' },
        subscription: subscriptionObject({ id: 'sub_Expanded1' }),
      });
      expect(toPaymentEvent(eventOf('checkout.session.completed', session))).toMatchObject({
        customerId: 'cus_Expanded1',
        subscriptionId: 'sub_Expanded1',
      });
    });

    it('has no subscription id when the session names none', () => {
      const event = toPaymentEvent(
        eventOf('checkout.session.completed', checkoutSessionObject({ subscription: null })),
      );
      expect(event).toEqual({
        ...eventFields,
        type: 'checkout.session.completed',
        customerId: 'cus_QxYz2AbCdEfGhIj',
        subscriptionId: null,
      });
    });

    it.each([
      ['a one-off payment', { mode: 'payment' }, 'checkout.session.completed (payment, no subscription)'],
      [
        'a saved card',
        { mode: 'setup', subscription: null },
        'checkout.session.completed (setup, no subscription)',
      ],
      [
        'a subscription checkout of a guest (no customer)',
        { customer: null },
        'checkout.session.completed (subscription, no subscription)',
      ],
    ])('is an event billing does not act on for %s', (_case, changes, providerType) => {
      expect(toPaymentEvent(eventOf('checkout.session.completed', checkoutSessionObject(changes)))).toEqual({
        ...eventFields,
        type: 'other',
        providerType,
      });
    });
  });

  describe('invoices', () => {
    it('reads a paid invoice of the current shape (parent.subscription_details), and nothing of the invoice', () => {
      expect(toPaymentEvent(eventOf('invoice.payment_succeeded', invoiceObject({ status: 'paid' })))).toEqual(
        {
          ...eventFields,
          type: 'invoice.payment_succeeded',
          customerId: 'cus_QxYz2AbCdEfGhIj',
          subscriptionId: 'sub_1QxYz2AbCdEfGhIj',
        },
      );
    });

    it('reads an invoice of the shape before API version 2025-03-31 (subscription)', () => {
      const legacy = invoiceObject({ parent: undefined, subscription: 'sub_Legacy1' });
      expect(toPaymentEvent(eventOf('invoice.payment_succeeded', legacy))).toMatchObject({
        subscriptionId: 'sub_Legacy1',
      });
      const expanded = invoiceObject({
        parent: null,
        subscription: { id: 'sub_Legacy2', object: 'subscription' },
      });
      expect(toPaymentEvent(eventOf('invoice.payment_failed', expanded))).toMatchObject({
        subscriptionId: 'sub_Legacy2',
      });
    });

    it('prefers the parent when an invoice has both', () => {
      const both = invoiceObject({ subscription: 'sub_Legacy1' });
      expect(toPaymentEvent(eventOf('invoice.payment_succeeded', both))).toMatchObject({
        subscriptionId: 'sub_1QxYz2AbCdEfGhIj',
      });
    });

    it('takes the id of an expanded subscription in the parent', () => {
      const invoice = invoiceObject({
        parent: { type: 'subscription_details', subscription_details: { subscription: { id: 'sub_Exp3' } } },
      });
      expect(toPaymentEvent(eventOf('invoice.payment_succeeded', invoice))).toMatchObject({
        subscriptionId: 'sub_Exp3',
      });
    });

    it('has no subscription id for an invoice of no subscription (a quote, a one-off invoice)', () => {
      const quote = invoiceObject({
        parent: { type: 'quote_details', quote_details: { quote: 'qt_1' }, subscription_details: null },
      });
      expect(toPaymentEvent(eventOf('invoice.payment_succeeded', quote))).toMatchObject({
        subscriptionId: null,
      });
      expect(
        toPaymentEvent(eventOf('invoice.payment_failed', invoiceObject({ parent: null }))),
      ).toMatchObject({
        subscriptionId: null,
      });
    });

    it('keeps what the admins are told of a failed payment: amount, currency, invoice page, next attempt', () => {
      const failed = invoiceObject({
        amount_due: 290_00,
        currency: 'EUR',
        next_payment_attempt: seconds('2026-01-04T00:00:00.000Z'),
      });
      expect(toPaymentEvent(eventOf('invoice.payment_failed', failed))).toEqual({
        ...eventFields,
        type: 'invoice.payment_failed',
        customerId: 'cus_QxYz2AbCdEfGhIj',
        subscriptionId: 'sub_1QxYz2AbCdEfGhIj',
        invoice: {
          amountDue: 290_00,
          currency: 'eur',
          url: 'https://invoice.stripe.com/i/acct_1/test_abc',
          nextAttemptAt: new Date('2026-01-04T00:00:00.000Z'),
        },
      });
    });

    it('has no next attempt after Stripe gave up, and no page when the invoice has none', () => {
      const last = invoiceObject({ next_payment_attempt: null, hosted_invoice_url: null });
      expect(toPaymentEvent(eventOf('invoice.payment_failed', last))).toMatchObject({
        invoice: { amountDue: 2900, currency: 'usd', url: null, nextAttemptAt: null },
      });
      const { hosted_invoice_url: _url, next_payment_attempt: _next, ...without } = invoiceObject();
      expect(toPaymentEvent(eventOf('invoice.payment_failed', without))).toMatchObject({
        invoice: { url: null, nextAttemptAt: null },
      });
    });
  });

  describe('customer.subscription.updated', () => {
    const facts = {
      id: 'sub_1QxYz2AbCdEfGhIj',
      plan: 'pro',
      cycle: 'annual',
      status: 'active',
      currentPeriodEnd: new Date(PERIOD_END),
      endsAt: null,
    };

    it('reads plan, cycle, status and the period of the subscription', () => {
      expect(toPaymentEvent(eventOf('customer.subscription.updated', subscriptionObject()))).toEqual({
        ...eventFields,
        type: 'customer.subscription.updated',
        customerId: 'cus_QxYz2AbCdEfGhIj',
        subscription: { id: 'sub_1QxYz2AbCdEfGhIj', customerId: 'cus_QxYz2AbCdEfGhIj', facts },
      });
    });

    it('takes the id of an expanded customer', () => {
      const subscription = subscriptionObject({ customer: { id: 'cus_Expanded1', object: 'customer' } });
      expect(toPaymentEvent(eventOf('customer.subscription.updated', subscription))).toMatchObject({
        customerId: 'cus_Expanded1',
        subscription: { customerId: 'cus_Expanded1' },
      });
    });

    it.each(SUBSCRIPTION_STATUSES)('passes status %s through', (status) => {
      expect(
        toPaymentEvent(eventOf('customer.subscription.updated', subscriptionObject({ status }))),
      ).toMatchObject({ subscription: { facts: { status } } });
    });

    it('ends at the date a cancellation in the portal set', () => {
      const subscription = subscriptionObject({ cancel_at: seconds(CANCEL_AT) });
      expect(toPaymentEvent(eventOf('customer.subscription.updated', subscription))).toMatchObject({
        subscription: { facts: { ...facts, endsAt: new Date(CANCEL_AT) } },
      });
    });

    it("ends at the period's end when cancelled at the period's end", () => {
      const subscription = subscriptionObject({ cancel_at_period_end: true });
      expect(toPaymentEvent(eventOf('customer.subscription.updated', subscription))).toMatchObject({
        subscription: { facts: { ...facts, endsAt: new Date(PERIOD_END) } },
      });
    });

    it("takes a set date over the period's end when Stripe names both", () => {
      const subscription = subscriptionObject({ cancel_at: seconds(CANCEL_AT), cancel_at_period_end: true });
      expect(toPaymentEvent(eventOf('customer.subscription.updated', subscription))).toMatchObject({
        subscription: { facts: { endsAt: new Date(CANCEL_AT) } },
      });
    });

    it('reads the period of the subscription as API versions before 2025-03-31 sent it', () => {
      const legacy = subscriptionObject(
        { current_period_end: seconds('2026-02-01T00:00:00.000Z') },
        { current_period_end: undefined },
      );
      expect(toPaymentEvent(eventOf('customer.subscription.updated', legacy))).toMatchObject({
        subscription: { facts: { currentPeriodEnd: new Date('2026-02-01T00:00:00.000Z') } },
      });
      // An item that has its own period wins over the subscription's.
      const both = subscriptionObject({ current_period_end: seconds('2026-02-01T00:00:00.000Z') });
      expect(toPaymentEvent(eventOf('customer.subscription.updated', both))).toMatchObject({
        subscription: { facts: { currentPeriodEnd: new Date(PERIOD_END) } },
      });
    });

    it.each([
      ['a price of no lookup key', { price: { lookup_key: null } }],
      ['a price without the field', { price: {} }],
      ['another product', { price: { lookup_key: 'team_monthly' } }],
      ['a longer key', { price: { lookup_key: 'pro_monthly_v2' } }],
      ['a key with a prefix', { price: { lookup_key: 'xpro_monthly' } }],
      ['an unknown cycle', { price: { lookup_key: 'pro_weekly' } }],
      ['no period end', { current_period_end: null }],
    ])('has no facts for %s, but names subscription and customer', (_case, item) => {
      expect(toPaymentEvent(eventOf('customer.subscription.updated', subscriptionObject({}, item)))).toEqual({
        ...eventFields,
        type: 'customer.subscription.updated',
        customerId: 'cus_QxYz2AbCdEfGhIj',
        subscription: { id: 'sub_1QxYz2AbCdEfGhIj', customerId: 'cus_QxYz2AbCdEfGhIj', facts: null },
      });
    });

    it('reads the first item of a subscription of several', () => {
      const base = subscriptionObject();
      const items = base.items as { data: Record<string, unknown>[] };
      const second = { ...items.data[0], price: { lookup_key: 'basic_monthly' } };
      const subscription = { ...base, items: { ...items, data: [...items.data, second] } };
      expect(toPaymentEvent(eventOf('customer.subscription.updated', subscription))).toMatchObject({
        subscription: { facts: { plan: 'pro', cycle: 'annual' } },
      });
    });
  });

  it('names customer and subscription of customer.subscription.deleted', () => {
    const deleted = subscriptionObject({ status: 'canceled', ended_at: seconds(CREATED) });
    expect(toPaymentEvent(eventOf('customer.subscription.deleted', deleted))).toEqual({
      ...eventFields,
      type: 'customer.subscription.deleted',
      customerId: 'cus_QxYz2AbCdEfGhIj',
      subscriptionId: 'sub_1QxYz2AbCdEfGhIj',
    });
  });

  it.each(['customer.created', 'invoice.paid', 'charge.succeeded', 'checkout.session.expired'])(
    'reads %s as an event billing does not act on, whatever its object',
    (type) => {
      expect(toPaymentEvent(eventOf(type, { anything: ['goes'], customer: 'not an id!' }))).toEqual({
        ...eventFields,
        type: 'other',
        providerType: type,
      });
    },
  );

  it('reads the time Stripe made the event from Unix seconds, up to the last second of year 9999', () => {
    expect(toPaymentEvent({ ...eventOf('x', {}), created: 0 })).toMatchObject({ created: new Date(0) });
    expect(toPaymentEvent({ ...eventOf('x', {}), created: 253_402_300_799 })).toMatchObject({
      created: new Date('9999-12-31T23:59:59.000Z'),
    });
  });
});

describe('toPaymentEvent refuses what Stripe does not send', () => {
  /** The AppError `toPaymentEvent` threw for this payload. */
  async function refusal(raw: unknown): Promise<AppError> {
    const error = await failureOf(() => toPaymentEvent(raw));
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: 'MALFORMED_REQUEST' });
    return error as AppError;
  }

  it.each([
    ['null', null],
    ['a string', 'evt_1'],
    ['an array', [eventOf('x', {})]],
    ['an empty object', {}],
  ])('refuses %s as an event', async (_case, raw) => {
    expect((await refusal(raw)).detail).toBe('The event is not shaped as Stripe sends it');
  });

  it('names the field, dotted, that is wrong', async () => {
    const error = await refusal({ ...eventOf('x', {}), data: { object: 'cus_1' } });
    expect(error.fields).toEqual([{ path: 'data.object', message: expect.stringMatching(/record/) }]);
    const deep = await refusal(
      eventOf('customer.subscription.updated', subscriptionObject({}, { price: { lookup_key: 7 } })),
    );
    expect(deep.fields).toEqual([{ path: 'items.data.0.price.lookup_key', message: expect.any(String) }]);
  });

  it('names the first five wrong fields of a payload that has more', async () => {
    const error = await refusal(
      eventOf('customer.subscription.updated', {
        id: 'sub 1',
        customer: 5,
        status: 'weird',
        cancel_at_period_end: 'no',
        cancel_at: -1,
        current_period_end: 1.5,
        items: { data: [] },
      }),
    );
    expect(error.detail).toBe('The subscription is not shaped as Stripe sends it');
    expect(error.fields).toEqual([
      { path: 'id', message: 'not a Stripe id' },
      { path: 'customer', message: expect.any(String) },
      { path: 'status', message: expect.any(String) },
      { path: 'cancel_at_period_end', message: expect.any(String) },
      { path: 'cancel_at', message: expect.any(String) },
    ]);
  });

  it.each([
    [
      'checkout.session.completed',
      { customer: 'cus_1' },
      'The checkout session is not shaped as Stripe sends it',
      'mode',
    ],
    [
      'invoice.payment_succeeded',
      invoiceObject({ customer: null }),
      'The invoice is not shaped as Stripe sends it',
      'customer',
    ],
    [
      'invoice.payment_failed',
      invoiceObject({ amount_due: '2900' }),
      'The invoice is not shaped as Stripe sends it',
      'amount_due',
    ],
    [
      'customer.subscription.updated',
      subscriptionObject({ status: 'bogus' }),
      'The subscription is not shaped as Stripe sends it',
      'status',
    ],
    [
      'customer.subscription.deleted',
      subscriptionObject({ id: null }),
      'The subscription is not shaped as Stripe sends it',
      'id',
    ],
  ])('refuses a malformed object of %s', async (type, object, detail, path) => {
    const error = await refusal(eventOf(type, object));
    expect(error.detail).toBe(detail);
    expect(error.fields.map((field) => field.path)).toEqual([path]);
  });

  // Ids reach SQL and Stripe's request paths: only letters, digits and underscores, at most 255.
  it.each([
    ['SQL', "cus_1'; drop table billing.licenses; --"],
    ['a path', '../v1/customers'],
    ['a query', 'cus_1?expand[]=subscriptions'],
    ['a space', 'cus 1'],
    ['a NUL', 'cus_1\u0000'],
    ['a non-ASCII letter', 'cus_ü'],
    ['an empty id', ''],
    ['256 characters', `cus_${'a'.repeat(252)}`],
  ])('refuses an id with %s, wherever it is', async (_case, id) => {
    const asEvent = await refusal({ ...eventOf('customer.created', {}), id });
    expect(asEvent.fields).toEqual([{ path: 'id', message: 'not a Stripe id' }]);
    const asCustomer = await refusal(eventOf('invoice.payment_succeeded', invoiceObject({ customer: id })));
    expect(asCustomer.fields.map((field) => field.path)).toEqual(['customer']);
    const asExpanded = await refusal(
      eventOf('checkout.session.completed', checkoutSessionObject({ customer: { id, object: 'customer' } })),
    );
    expect(asExpanded.fields.map((field) => field.path)).toEqual(['customer']);
    const asSubscription = await refusal(
      eventOf('customer.subscription.deleted', subscriptionObject({ id })),
    );
    expect(asSubscription.fields.map((field) => field.path)).toEqual(['id']);
    const inParent = await refusal(
      eventOf(
        'invoice.payment_failed',
        invoiceObject({ parent: { subscription_details: { subscription: id } } }),
      ),
    );
    expect(inParent.fields.map((field) => field.path)).toEqual(['parent.subscription_details.subscription']);
  });

  it('takes an id of 255 characters', () => {
    const id = `evt_${'a'.repeat(251)}`;
    expect(toPaymentEvent({ ...eventOf('customer.created', {}), id })).toMatchObject({ id });
  });

  it('refuses an expanded reference without an id', async () => {
    const error = await refusal(
      eventOf('checkout.session.completed', checkoutSessionObject({ customer: { object: 'customer' } })),
    );
    expect(error.fields.map((field) => field.path)).toEqual(['customer']);
  });

  it('refuses an event type that is empty or over 200 characters, and takes one of 200', async () => {
    expect((await refusal({ ...eventOf('x', {}), type: '' })).fields.map((f) => f.path)).toEqual(['type']);
    expect((await refusal({ ...eventOf('x', {}), type: 'a'.repeat(201) })).fields.map((f) => f.path)).toEqual(
      ['type'],
    );
    expect(toPaymentEvent({ ...eventOf('x', {}), type: 'a'.repeat(200) })).toMatchObject({
      type: 'other',
      providerType: 'a'.repeat(200),
    });
  });

  it.each([
    ['before 1970', -1],
    ['a fraction', 1_767_225_600.5],
    ['after year 9999', 253_402_300_800],
    ['a string', '1767225600'],
  ])('refuses a time %s', async (_case, created) => {
    expect((await refusal({ ...eventOf('x', {}), created })).fields.map((f) => f.path)).toEqual(['created']);
  });

  it('refuses times of a subscription and an invoice that make no date', async () => {
    const period = await refusal(
      eventOf(
        'customer.subscription.updated',
        subscriptionObject({}, { current_period_end: 253_402_300_800 }),
      ),
    );
    expect(period.fields.map((f) => f.path)).toEqual(['items.data.0.current_period_end']);
    const next = await refusal(
      eventOf('invoice.payment_failed', invoiceObject({ next_payment_attempt: -5 })),
    );
    expect(next.fields.map((f) => f.path)).toEqual(['next_payment_attempt']);
  });

  it('refuses a subscription without items', async () => {
    const error = await refusal(
      eventOf('customer.subscription.updated', subscriptionObject({ items: { object: 'list', data: [] } })),
    );
    expect(error.fields.map((f) => f.path)).toEqual(['items.data']);
  });

  it.each([
    ['negative', -1],
    ['a fraction', 29.5],
    ['beyond exact integers', Number.MAX_SAFE_INTEGER + 1],
  ])('refuses an amount due that is %s', async (_case, amount_due) => {
    const error = await refusal(eventOf('invoice.payment_failed', invoiceObject({ amount_due })));
    expect(new Set(error.fields.map((f) => f.path))).toEqual(new Set(['amount_due']));
  });

  it('takes an amount due of zero and of the largest exact integer', () => {
    for (const amount_due of [0, Number.MAX_SAFE_INTEGER]) {
      expect(toPaymentEvent(eventOf('invoice.payment_failed', invoiceObject({ amount_due })))).toMatchObject({
        invoice: { amountDue: amount_due },
      });
    }
  });

  it.each(['us', 'usdd', '€ur', 'u$d', '', 'usd\n'])('refuses the currency %j', async (currency) => {
    const error = await refusal(eventOf('invoice.payment_failed', invoiceObject({ currency })));
    expect(error.fields.map((f) => f.path)).toEqual(['currency']);
  });

  it.each([
    ['a script', 'javascript:alert(document.cookie)'],
    ['a data URL', 'data:text/html,<script>alert(1)</script>'],
    ['FTP', 'ftp://invoice.stripe.com/i/1'],
    ['a scheme that starts as https', 'httpsx://invoice.stripe.com/i/1'],
    ['a scheme that ends as https', 'xhttps://invoice.stripe.com/i/1'],
    ['no URL', 'invoice page'],
    ['over 2048 characters', `https://invoice.stripe.com/${'a'.repeat(2_022)}`],
  ])('refuses an invoice page that is %s', async (_case, hosted_invoice_url) => {
    const error = await refusal(eventOf('invoice.payment_failed', invoiceObject({ hosted_invoice_url })));
    expect(error.fields.map((f) => f.path)).toEqual(['hosted_invoice_url']);
  });

  it('takes an invoice page of 2048 characters over https or http', () => {
    for (const url of [`https://invoice.stripe.com/${'a'.repeat(2_021)}`, 'http://invoice.example/i/1']) {
      expect(
        toPaymentEvent(eventOf('invoice.payment_failed', invoiceObject({ hosted_invoice_url: url }))),
      ).toMatchObject({ invoice: { url } });
    }
  });

  it('reads no field from a prototype a payload smuggles in', async () => {
    const { customer: _customer, ...withoutCustomer } = invoiceObject();
    const hostile = JSON.parse(
      JSON.stringify(eventOf('invoice.payment_succeeded', withoutCustomer)).replace(
        '"object":"invoice"',
        '"object":"invoice","__proto__":{"customer":"cus_Evil"}',
      ),
    ) as unknown;
    const error = await refusal(hostile);
    expect(error.fields.map((f) => f.path)).toEqual(['customer']);
  });
});

describe('createStripeClient', () => {
  const settings = { STRIPE_WEBHOOK_SECRET: 'whsec_x', STRIPE_TIMEOUT_MS: 4_000 };

  it('makes no client without a secret key', () => {
    expect(createStripeClient({ ...settings, STRIPE_API_BASE: 'https://api.stripe.com' })).toBeNull();
    expect(
      createStripeClient({ ...settings, STRIPE_SECRET_KEY: '', STRIPE_API_BASE: 'https://api.stripe.com' }),
    ).toBeNull();
  });

  it.each([
    ['https://api.stripe.com', 'api.stripe.com', 443, 'https'],
    ['https://stripe.internal:8443', 'stripe.internal', '8443', 'https'],
    ['http://127.0.0.1:12111', '127.0.0.1', '12111', 'http'],
    ['http://stripe-mock', 'stripe-mock', 80, 'http'],
  ])('points the SDK at %s', (base, host, port, protocol) => {
    const client = createStripeClient({ ...settings, STRIPE_SECRET_KEY: 'sk_test_1', STRIPE_API_BASE: base });
    expect(client).not.toBeNull();
    expect({
      host: client?.getApiField('host'),
      port: client?.getApiField('port'),
      protocol: client?.getApiField('protocol'),
      timeout: client?.getApiField('timeout'),
      maxNetworkRetries: client?.getApiField('maxNetworkRetries'),
      // Stripe's telemetry sends the previous request's timings with each request: we send nothing extra.
      telemetry: client?.getTelemetryEnabled(),
    }).toEqual({ host, port, protocol, timeout: 4_000, maxNetworkRetries: 1, telemetry: false });
  });
});

describe('StripePaymentProvider.verifyEvent', () => {
  const secret = 'whsec_unit_test_secret';
  const provider = new StripePaymentProvider(new Stripe('sk_test_unused'), secret, silent);
  const event = eventOf('checkout.session.completed', checkoutSessionObject());
  const verify = (payload: string, signature: string) =>
    provider.verifyEvent(new TextEncoder().encode(payload), signature);

  it('reads an event signed with the secret', () => {
    const { payload, signature } = signStripePayload(event, secret);
    expect(verify(payload, signature)).toEqual({
      ...eventFields,
      type: 'checkout.session.completed',
      customerId: 'cus_QxYz2AbCdEfGhIj',
      subscriptionId: 'sub_1QxYz2AbCdEfGhIj',
    });
  });

  it('refuses every event when no signing secret is configured', async () => {
    for (const missing of [undefined, '']) {
      const unconfigured = new StripePaymentProvider(new Stripe('sk_test_unused'), missing, silent);
      const { payload, signature } = signStripePayload(event, secret);
      const error = await failureOf(() =>
        unconfigured.verifyEvent(new TextEncoder().encode(payload), signature),
      );
      expect(error).toBeInstanceOf(AppError);
      expect(error).toMatchObject({
        code: 'BILLING_NOT_CONFIGURED',
        detail: 'The webhook signing secret (STRIPE_WEBHOOK_SECRET) is not set',
      });
    }
  });

  it.each([
    ['another secret', () => signStripePayload(event, 'whsec_other')],
    [
      'a body changed after signing',
      () => {
        const signed = signStripePayload(event, secret);
        return { ...signed, payload: signed.payload.replace('cus_QxYz2AbCdEfGhIj', 'cus_Attacker1') };
      },
    ],
    [
      'a signature of six minutes ago (a replay)',
      () => signStripePayload(event, secret, { timestamp: Math.floor(Date.now() / 1000) - 360 }),
    ],
    ['no signature', () => ({ payload: JSON.stringify(event), signature: '' })],
    ['a header of another format', () => ({ payload: JSON.stringify(event), signature: 'sha256=abc' })],
  ])('refuses %s', async (_case, delivery) => {
    const { payload, signature } = delivery();
    const error = await failureOf(() => verify(payload, signature));
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({
      code: 'WEBHOOK_SIGNATURE_INVALID',
      detail: 'The Stripe-Signature header does not verify this body',
    });
  });

  it('takes a signature of four minutes ago (a delivery Stripe retried)', () => {
    const { payload, signature } = signStripePayload(event, secret, {
      timestamp: Math.floor(Date.now() / 1000) - 240,
    });
    expect(verify(payload, signature)).toMatchObject({ type: 'checkout.session.completed' });
  });

  it('refuses a signed body that is not JSON as malformed, not as a bad signature', async () => {
    const { payload, signature } = signStripePayload('{"id": "evt_1", truncated', secret);
    const error = await failureOf(() => verify(payload, signature));
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: 'MALFORMED_REQUEST', detail: 'The signed body is not a JSON event' });
  });

  it('refuses a signed JSON body that is no event', async () => {
    const { payload, signature } = signStripePayload('{"hello":"world"}', secret);
    const error = await failureOf(() => verify(payload, signature));
    expect(error).toMatchObject({
      code: 'MALFORMED_REQUEST',
      detail: 'The event is not shaped as Stripe sends it',
    });
  });
});
