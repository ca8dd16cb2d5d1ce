import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { AppError } from '@sts/errors/app-error';
import { capturedLogger } from '@sts/logger/captured-logger';
import { createLogger, type Logger } from '@sts/logger/create-logger';
import { startStripeStandIn, type StripeStandIn } from '@sts/stand-ins/stripe-stand-in';
import { failureOf } from '@sts/testing/failure-of';
import { createStripeClient, StripePaymentProvider } from './stripe-payment-provider';
import { checkoutSessionObject, subscriptionObject } from './test/stripe-objects';

// The adapter's calls against the Stripe stand-in (an HTTP server speaking Stripe's API to the official SDK);
// a few answers the stand-in never gives (403, 429, a session without a url, …) come from a small server of
// this file that answers as each test says. What Stripe sends and what billing makes of it (no I/O) is in
// stripe-payment-provider.spec.ts.

const silent = createLogger('stripe-provider-spec', 'silent');

describe('StripePaymentProvider against the Stripe stand-in', () => {
  let stripe: StripeStandIn;
  let orgCount = 0;
  const nextOrg = () => `org-${++orgCount}-${Date.now()}`;

  beforeAll(async () => {
    stripe = await startStripeStandIn();
  });
  afterEach(() => stripe.failRequests('none'));
  afterAll(async () => {
    await stripe?.close();
  });

  const providerOf = (options: { apiKey?: string; logger?: Logger; base?: string } = {}) =>
    new StripePaymentProvider(
      createStripeClient({
        STRIPE_SECRET_KEY: options.apiKey ?? stripe.apiKey,
        STRIPE_API_BASE: options.base ?? stripe.url,
        STRIPE_TIMEOUT_MS: 3_000,
      })!,
      'whsec_unused',
      options.logger ?? silent,
    );
  /** The requests the stand-in received from `from` (an index of `requests`) on. */
  const requestsSince = (from: number) => stripe.requests.slice(from).map((r) => `${r.method} ${r.path}`);

  describe('createCustomer', () => {
    it("makes one customer per organization, keyed by it, and sets the admin's e-mail after", async () => {
      const orgId = nextOrg();
      const from = stripe.requests.length;
      const customerId = await providerOf().createCustomer({ orgId, email: 'admin@acme.test' });

      expect(stripe.customers.get(customerId)).toMatchObject({
        email: 'admin@acme.test',
        metadata: { org_id: orgId },
      });
      expect(stripe.requests.slice(from)).toEqual([
        {
          method: 'POST',
          path: '/v1/customers',
          params: { metadata: { org_id: orgId } },
          idempotencyKey: `customer-of-org-${orgId}`,
        },
        expect.objectContaining({
          method: 'POST',
          path: `/v1/customers/${customerId}`,
          params: { email: 'admin@acme.test' },
        }),
      ]);
    });

    it('gives the same organization the same customer again (Stripe replays the answer to its key)', async () => {
      const orgId = nextOrg();
      const provider = providerOf();
      const first = await provider.createCustomer({ orgId, email: 'admin@acme.test' });
      // A retried first checkout, or another admin's at the same time: the replayed answer has no e-mail,
      // so the caller's is set again.
      const from = stripe.requests.length;
      expect(await provider.createCustomer({ orgId, email: 'other-admin@acme.test' })).toBe(first);
      expect(requestsSince(from)).toEqual(['POST /v1/customers', `POST /v1/customers/${first}`]);
      expect(stripe.customers.get(first)?.email).toBe('other-admin@acme.test');
      expect(await providerOf().createCustomer({ orgId, email: null })).toBe(first);
      expect([...stripe.customers.values()].filter((c) => c.metadata.org_id === orgId)).toHaveLength(1);

      const another = await provider.createCustomer({ orgId: nextOrg(), email: null });
      expect(another).not.toBe(first);
    });

    it('sets no e-mail when it has none', async () => {
      const from = stripe.requests.length;
      const customerId = await providerOf().createCustomer({ orgId: nextOrg(), email: null });
      expect(stripe.customers.get(customerId)?.email).toBeNull();
      expect(requestsSince(from)).toEqual(['POST /v1/customers']);
    });
  });

  describe('priceOf', () => {
    it.each([
      ['basic', 'monthly'],
      ['basic', 'annual'],
      ['pro', 'monthly'],
      ['pro', 'annual'],
      ['enterprise', 'monthly'],
      ['enterprise', 'annual'],
    ] as const)('finds the active price of %s, %s by its lookup key', async (plan, cycle) => {
      const from = stripe.requests.length;
      expect(await providerOf().priceOf(plan, cycle)).toBe(stripe.price(`${plan}_${cycle}`).id);
      expect(stripe.requests.slice(from)).toEqual([
        expect.objectContaining({
          method: 'GET',
          path: '/v1/prices',
          params: { lookup_keys: [`${plan}_${cycle}`], active: 'true', limit: '1' },
        }),
      ]);
    });

    it('keeps a price ten minutes, then asks Stripe again', async () => {
      const provider = providerOf();
      const lookups = () => stripe.requests.filter((r) => r.path === '/v1/prices').length;
      const clock = jest.spyOn(Date, 'now');
      try {
        const start = Date.parse('2026-03-01T12:00:00.000Z');
        clock.mockReturnValue(start);
        const before = lookups();
        const priceId = await provider.priceOf('pro', 'monthly');
        expect(lookups()).toBe(before + 1);

        clock.mockReturnValue(start + 10 * 60_000 - 1);
        expect(await provider.priceOf('pro', 'monthly')).toBe(priceId);
        expect(lookups()).toBe(before + 1);
        // Another plan's price is its own lookup.
        expect(await provider.priceOf('pro', 'annual')).toBe(stripe.price('pro_annual').id);
        expect(lookups()).toBe(before + 2);

        clock.mockReturnValue(start + 10 * 60_000);
        expect(await provider.priceOf('pro', 'monthly')).toBe(priceId);
        expect(lookups()).toBe(before + 3);
        clock.mockReturnValue(start + 10 * 60_000 + 1);
        expect(await provider.priceOf('pro', 'monthly')).toBe(priceId);
        expect(lookups()).toBe(before + 3);
      } finally {
        clock.mockRestore();
      }
    });

    it('is not configured when Stripe has no active price of the lookup key', async () => {
      const bare = await startStripeStandIn({
        prices: [{ lookupKey: 'pro_monthly', unitAmount: 2900, interval: 'month', productName: 'pro' }],
      });
      try {
        const provider = providerOf({ apiKey: bare.apiKey, base: bare.url });
        const error = await failureOf(() => provider.priceOf('pro', 'annual'));
        expect(error).toBeInstanceOf(AppError);
        expect(error).toMatchObject({
          code: 'BILLING_NOT_CONFIGURED',
          detail: 'No active Stripe price has the lookup key pro_annual',
        });
        expect(await provider.priceOf('pro', 'monthly')).toBe(bare.price('pro_monthly').id);
      } finally {
        await bare.close();
      }
    });
  });

  describe('checkout sessions', () => {
    async function newSession(orgId = nextOrg()) {
      const provider = providerOf();
      const customerId = await provider.createCustomer({ orgId, email: null });
      const priceId = await provider.priceOf('enterprise', 'annual');
      const session = await provider.createCheckoutSession({
        orgId,
        customerId,
        priceId,
        successUrl: 'https://app.test/billing?checkout=success',
        cancelUrl: 'https://app.test/billing?checkout=cancel',
      });
      return { provider, orgId, customerId, priceId, session };
    }

    it("opens a subscription checkout of the price for the organization's customer", async () => {
      const { orgId, customerId, priceId, session } = await newSession();
      const made = stripe.checkoutSessions.get(session.id);
      expect(session).toEqual({ id: made?.id, url: made?.url });
      expect(session.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/checkout\/cs_test_/);
      expect(made).toMatchObject({
        mode: 'subscription',
        customer: customerId,
        client_reference_id: orgId,
        metadata: { org_id: orgId },
        success_url: 'https://app.test/billing?checkout=success',
        cancel_url: 'https://app.test/billing?checkout=cancel',
        status: 'open',
      });
      expect(stripe.checkoutLine(session.id)).toMatchObject({ price: { id: priceId }, quantity: 1 });
      // The subscription Stripe makes when it is paid names the organization too.
      const { subscription } = stripe.completeCheckout(session.id);
      expect(subscription.metadata).toEqual({ org_id: orgId });
    });

    it('closes an open session: Stripe expires it', async () => {
      const { provider, session } = await newSession();
      expect(await provider.closeCheckoutSession(session.id)).toBe('closed');
      expect(stripe.checkoutSessions.get(session.id)?.status).toBe('expired');
    });

    it('answers paid for a session that was paid, and expires nothing', async () => {
      const { provider, session } = await newSession();
      stripe.completeCheckout(session.id);
      const from = stripe.requests.length;
      expect(await provider.closeCheckoutSession(session.id)).toBe('paid');
      expect(requestsSince(from)).toEqual([`GET /v1/checkout/sessions/${session.id}`]);
      expect(stripe.checkoutSessions.get(session.id)?.status).toBe('complete');
    });

    it('answers closed for a session that expired already, and asks nothing more', async () => {
      const { provider, session } = await newSession();
      await provider.closeCheckoutSession(session.id);
      const from = stripe.requests.length;
      expect(await provider.closeCheckoutSession(session.id)).toBe('closed');
      expect(requestsSince(from)).toEqual([`GET /v1/checkout/sessions/${session.id}`]);
    });

    it('answers closed for a session Stripe does not have', async () => {
      expect(await providerOf().closeCheckoutSession('cs_test_unknown1')).toBe('closed');
    });

    it('cannot open a checkout for a customer Stripe does not have (our bug, not a retry)', async () => {
      const error = await failureOf(() =>
        providerOf().createCheckoutSession({
          orgId: nextOrg(),
          customerId: 'cus_unknown1',
          priceId: stripe.price('pro_monthly').id,
          successUrl: 'https://app.test/ok',
          cancelUrl: 'https://app.test/cancel',
        }),
      );
      expect(error).not.toBeInstanceOf(AppError);
      expect(error).toMatchObject({
        message: 'Stripe could not create the checkout session',
        cause: expect.any(Stripe.errors.StripeInvalidRequestError),
      });
    });
  });

  describe('createPortalSession', () => {
    it("opens the portal for the customer, returning to the dashboard's address", async () => {
      const provider = providerOf();
      const customerId = await provider.createCustomer({ orgId: nextOrg(), email: null });
      const url = await provider.createPortalSession({ customerId, returnUrl: 'https://app.test/billing' });
      const [session] = [...stripe.portalSessions.values()].filter((s) => s.customer === customerId);
      expect(session).toMatchObject({ url, return_url: 'https://app.test/billing' });
      expect(url).toMatch(/\/portal\/bps_/);
    });

    it('cannot open the portal of a customer Stripe does not have', async () => {
      const error = await failureOf(() =>
        providerOf().createPortalSession({
          customerId: 'cus_unknown1',
          returnUrl: 'https://app.test/billing',
        }),
      );
      expect(error).not.toBeInstanceOf(AppError);
      expect(error).toMatchObject({
        message: 'Stripe could not create the portal session',
        cause: expect.any(Stripe.errors.StripeInvalidRequestError),
      });
    });
  });

  describe('retrieveSubscription', () => {
    it('reads the subscription as Stripe has it now', async () => {
      const provider = providerOf();
      const orgId = nextOrg();
      const customerId = await provider.createCustomer({ orgId, email: null });
      const session = await provider.createCheckoutSession({
        orgId,
        customerId,
        priceId: await provider.priceOf('basic', 'monthly'),
        successUrl: 'https://app.test/ok',
        cancelUrl: 'https://app.test/cancel',
      });
      const { subscription } = stripe.completeCheckout(session.id, {
        currentPeriodEnd: new Date('2027-02-01T00:00:00.000Z'),
      });
      stripe.updateSubscription(subscription.id, { lookupKey: 'pro_annual', cancelAtPeriodEnd: true });

      expect(await provider.retrieveSubscription(subscription.id)).toEqual({
        id: subscription.id,
        customerId,
        facts: {
          id: subscription.id,
          plan: 'pro',
          cycle: 'annual',
          status: 'active',
          currentPeriodEnd: new Date('2027-02-01T00:00:00.000Z'),
          endsAt: new Date('2027-02-01T00:00:00.000Z'),
        },
      });
    });

    it('is null for a subscription Stripe does not have', async () => {
      expect(await providerOf().retrieveSubscription('sub_unknown1')).toBeNull();
    });
  });

  describe('when Stripe fails', () => {
    it('asks for a retry when Stripe answers 5xx, and logs the failure', async () => {
      const { logger, lines } = capturedLogger('stripe-provider-spec');
      const provider = providerOf({ logger });
      stripe.failRequests('error');
      const error = await failureOf(() => provider.createCustomer({ orgId: nextOrg(), email: null }));
      expect(error).toBeInstanceOf(AppError);
      expect(error).toMatchObject({
        code: 'PAYMENT_PROVIDER_UNAVAILABLE',
        detail: 'Stripe could not create the customer; try again',
        cause: expect.any(Stripe.errors.StripeAPIError),
      });
      expect(lines).toEqual([
        expect.objectContaining({
          level: 40,
          msg: 'Stripe call failed',
          what: 'create the customer',
          err: expect.objectContaining({ type: 'StripeAPIError' }),
        }),
      ]);
    });

    it('asks for a retry when Stripe is unreachable', async () => {
      stripe.failRequests('unreachable');
      const error = await failureOf(() => providerOf().retrieveSubscription('sub_1'));
      expect(error).toMatchObject({
        code: 'PAYMENT_PROVIDER_UNAVAILABLE',
        detail: 'Stripe could not read the subscription; try again',
        cause: expect.any(Stripe.errors.StripeConnectionError),
      });
    });

    it('is not configured when Stripe refuses the key', async () => {
      const error = await failureOf(() =>
        providerOf({ apiKey: 'sk_test_revoked' }).createCustomer({ orgId: nextOrg(), email: null }),
      );
      expect(error).toBeInstanceOf(AppError);
      expect(error).toMatchObject({
        code: 'BILLING_NOT_CONFIGURED',
        detail: 'Stripe refused the configured key (create the customer)',
        cause: expect.any(Stripe.errors.StripeAuthenticationError),
      });
    });

    it('never speaks plain HTTP to an https API base', async () => {
      const from = stripe.requests.length;
      const error = await failureOf(() =>
        providerOf({ base: stripe.url.replace('http:', 'https:') }).retrieveSubscription('sub_1'),
      );
      expect(error).toMatchObject({ code: 'PAYMENT_PROVIDER_UNAVAILABLE' });
      expect(stripe.requests.length).toBe(from);
    });
  });
});

/**
 * A server answering Stripe's API as a test says (JSON, Stripe's error shape), for answers the stand-in
 * never gives. `stripe-should-retry: false` as Stripe sends on errors a retry cannot cure: the SDK
 * then fails at once.
 */
async function startStripePeer(answer: (method: string, path: string) => { status: number; body: unknown }) {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const method = req.method ?? 'GET';
      const path = new URL(req.url ?? '/', 'http://peer').pathname;
      requests.push(`${method} ${path}`);
      const { status, body } = answer(method, path);
      res
        .writeHead(status, {
          'content-type': 'application/json',
          'request-id': 'req_peer1',
          ...(status >= 400 ? { 'stripe-should-retry': 'false' } : {}),
        })
        .end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const provider = new StripePaymentProvider(
    createStripeClient({
      STRIPE_SECRET_KEY: 'sk_test_peer',
      STRIPE_API_BASE: `http://127.0.0.1:${port}`,
      STRIPE_TIMEOUT_MS: 3_000,
    })!,
    undefined,
    silent,
  );
  return {
    provider,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

describe('StripePaymentProvider on answers the stand-in never gives', () => {
  const stripeError = (status: number, error: Record<string, unknown>) => ({ status, body: { error } });
  const answers: Array<{ close: () => Promise<void> }> = [];
  const peer = async (answer: Parameters<typeof startStripePeer>[0]) => {
    const started = await startStripePeer(answer);
    answers.push(started);
    return started;
  };
  afterEach(async () => {
    await Promise.all(answers.splice(0).map((started) => started.close()));
  });

  it.each([
    ['find the price', (provider: StripePaymentProvider) => provider.priceOf('basic', 'annual')],
    [
      'read the checkout session',
      (provider: StripePaymentProvider) => provider.closeCheckoutSession('cs_test_1'),
    ],
    [
      'create the portal session',
      (provider: StripePaymentProvider) =>
        provider.createPortalSession({ customerId: 'cus_1', returnUrl: 'https://app.test' }),
    ],
    ['read the subscription', (provider: StripePaymentProvider) => provider.retrieveSubscription('sub_1')],
    [
      'create the checkout session',
      (provider: StripePaymentProvider) =>
        provider.createCheckoutSession({
          orgId: 'org-1',
          customerId: 'cus_1',
          priceId: 'price_1',
          successUrl: 'https://app.test/ok',
          cancelUrl: 'https://app.test/cancel',
        }),
    ],
  ])('asks for a retry when Stripe cannot %s: no absent object read from a 5xx', async (what, call) => {
    const { provider } = await peer(() =>
      stripeError(503, { type: 'api_error', message: 'Service temporarily unavailable' }),
    );
    const error = await failureOf(() => call(provider));
    expect(error).toMatchObject({
      code: 'PAYMENT_PROVIDER_UNAVAILABLE',
      detail: `Stripe could not ${what}; try again`,
    });
  });

  it('asks for a retry when Stripe limits the rate', async () => {
    const { provider } = await peer(() =>
      stripeError(429, { type: 'invalid_request_error', code: 'rate_limit', message: 'Too many requests' }),
    );
    const error = await failureOf(() => provider.priceOf('pro', 'monthly'));
    expect(error).toMatchObject({
      code: 'PAYMENT_PROVIDER_UNAVAILABLE',
      detail: 'Stripe could not find the price; try again',
      cause: expect.any(Stripe.errors.StripeRateLimitError),
    });
  });

  it('is not configured when the key may not do the call (a restricted key)', async () => {
    const { provider } = await peer(() =>
      stripeError(403, { type: 'invalid_request_error', message: 'The provided key does not have access' }),
    );
    const error = await failureOf(() => provider.retrieveSubscription('sub_1'));
    expect(error).toMatchObject({
      code: 'BILLING_NOT_CONFIGURED',
      detail: 'Stripe refused the configured key (read the subscription)',
      cause: expect.any(Stripe.errors.StripePermissionError),
    });
  });

  it.each([
    [
      'a declined card (402)',
      402,
      { type: 'card_error', code: 'card_declined' },
      Stripe.errors.StripeCardError,
    ],
    ['an idempotency conflict', 400, { type: 'idempotency_error' }, Stripe.errors.StripeIdempotencyError],
  ])('reports %s as our bug, not as a retry', async (_case, status, error, cause) => {
    const { provider } = await peer(() => stripeError(status, { message: 'refused', ...error }));
    const failure = await failureOf(() => provider.createCustomer({ orgId: 'org-1', email: null }));
    expect(failure).not.toBeInstanceOf(AppError);
    expect(failure).toMatchObject({
      message: 'Stripe could not create the customer',
      cause: expect.any(cause),
    });
  });

  it('takes only resource_missing as an absent object: a 404 of a URL Stripe does not know is an error', async () => {
    const { provider } = await peer(() =>
      stripeError(404, {
        type: 'invalid_request_error',
        message: 'Unrecognized request URL (GET: /v1/subscriptions/sub_1).',
      }),
    );
    const error = await failureOf(() => provider.retrieveSubscription('sub_1'));
    expect(error).not.toBeInstanceOf(AppError);
    expect(error).toMatchObject({
      message: 'Stripe could not read the subscription',
      cause: expect.any(Stripe.errors.StripeInvalidRequestError),
    });
    const session = await failureOf(() => provider.closeCheckoutSession('cs_test_1'));
    expect(session).toMatchObject({ message: 'Stripe could not read the checkout session' });
  });

  it('names the call that failed when the e-mail cannot be set on a new customer', async () => {
    const { provider, requests } = await peer((method, path) =>
      path === '/v1/customers'
        ? { status: 200, body: { id: 'cus_Peer1', object: 'customer', email: null, metadata: {} } }
        : stripeError(500, { type: 'api_error', message: 'An unknown error occurred' }),
    );
    const error = await failureOf(() =>
      provider.createCustomer({ orgId: 'org-1', email: 'admin@acme.test' }),
    );
    expect(error).toMatchObject({
      code: 'PAYMENT_PROVIDER_UNAVAILABLE',
      detail: 'Stripe could not set the customer e-mail; try again',
    });
    expect(requests).toEqual(['POST /v1/customers', 'POST /v1/customers/cus_Peer1']);
  });

  it('names the call that failed when an open session cannot be expired', async () => {
    const { provider, requests } = await peer((method) =>
      method === 'GET'
        ? {
            status: 200,
            body: checkoutSessionObject({ id: 'cs_test_1', status: 'open', url: 'https://x.test' }),
          }
        : stripeError(500, { type: 'api_error', message: 'An unknown error occurred' }),
    );
    const error = await failureOf(() => provider.closeCheckoutSession('cs_test_1'));
    expect(error).toMatchObject({
      code: 'PAYMENT_PROVIDER_UNAVAILABLE',
      detail: 'Stripe could not expire the checkout session; try again',
    });
    expect(requests).toEqual([
      'GET /v1/checkout/sessions/cs_test_1',
      'POST /v1/checkout/sessions/cs_test_1/expire',
    ]);
  });

  it('refuses a checkout session Stripe returns without a url (an embedded one)', async () => {
    const { provider } = await peer(() => ({
      status: 200,
      body: checkoutSessionObject({
        id: 'cs_test_Embedded1',
        status: 'open',
        url: null,
        ui_mode: 'embedded',
      }),
    }));
    const error = await failureOf(() =>
      provider.createCheckoutSession({
        orgId: 'org-1',
        customerId: 'cus_1',
        priceId: 'price_1',
        successUrl: 'https://app.test/ok',
        cancelUrl: 'https://app.test/cancel',
      }),
    );
    expect(error).not.toBeInstanceOf(AppError);
    expect(error).toMatchObject({
      message: 'Stripe returned checkout session cs_test_Embedded1 without a url',
    });
  });

  it('refuses a subscription Stripe returns in a shape it does not send', async () => {
    const { provider } = await peer(() => ({
      status: 200,
      body: subscriptionObject({ items: { object: 'list', data: [] } }),
    }));
    const error = await failureOf(() => provider.retrieveSubscription('sub_1QxYz2AbCdEfGhIj'));
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({
      code: 'MALFORMED_REQUEST',
      detail: 'The subscription is not shaped as Stripe sends it',
      fields: [{ path: 'items.data', message: expect.any(String) }],
    });
  });
});
