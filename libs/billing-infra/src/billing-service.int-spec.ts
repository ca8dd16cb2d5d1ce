import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { loadConfig } from '@sts/config/load-config';
import { AppError } from '@sts/errors/app-error';
import type { DomainEvent } from '@sts/events/event-catalogue';
import { newEnvelope } from '@sts/events/event-envelope';
import { eventSubject } from '@sts/events/subjects';
import { createPromiseClient } from '@sts/grpc/grpc-client';
import { testServiceAuth } from '@sts/testing/service-auth';
import { createLogger } from '@sts/logger/create-logger';
import { createEventPublisher, type EventPublisher } from '@sts/nats/event-publisher';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { BillingCycle, BillingServiceService, LicenseStatus, Plan } from '@sts/proto/gen/billing/v1/billing';
import { eventually } from '@sts/testing/eventually';
import { startStripeStandIn, type StripeEvent, type StripeStandIn } from '@sts/stand-ins/stripe-stand-in';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { billingEnvSchema } from './billing-config';
import { startBillingService, type RunningService } from './start-billing-service';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const DAY_MS = 24 * 60 * 60 * 1000;

const orgCreated = (orgId: string, createdAt: Date): DomainEvent<'org.created'> =>
  newEnvelope('org.created', {
    org_id: orgId,
    name: 'Acme',
    domain: 'acme.test',
    created_at: createdAt.toISOString(),
  });

describe('billing service (PostgreSQL, NATS)', () => {
  const serviceAuth = testServiceAuth();
  const logger = createLogger('billing-int', 'silent');
  const namespace = uniqueNatsNamespace('bill');
  let database: TestDatabase;
  let service: RunningService;
  let nats: JetStreamConnection;
  let publish: EventPublisher;
  let client: ReturnType<typeof createPromiseClient<typeof BillingServiceService>>;
  let db: Client;

  const licenseRows = async (orgId: string) =>
    (await db.query<{ org_id: string }>('select org_id from billing.licenses where org_id = $1', [orgId]))
      .rows;
  const processed = async (eventId: string) =>
    (await db.query('select 1 from billing.processed_events where event_id = $1', [eventId])).rowCount === 1;

  beforeAll(async () => {
    database = await createTestDatabase('billing');
    const config = loadConfig(billingEnvSchema, {
      DATABASE_URL: database.url,
      NATS_URL,
      NATS_NAMESPACE: namespace,
      GRPC_PORT: '0',
      ...serviceAuth.envOf('billing'),
      LOG_LEVEL: 'silent',
    });
    service = await startBillingService(config, logger);
    nats = await connectJetStream({ url: NATS_URL, name: 'billing-int-test', logger });
    publish = createEventPublisher(nats.js, namespace);
    client = createPromiseClient(
      BillingServiceService,
      `127.0.0.1:${service.grpcPort}`,
      5_000,
      serviceAuth.as('billing'),
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
    await database?.drop();
  });

  it('creates the pending license when org.created arrives', async () => {
    const orgId = randomUUID();
    const createdAt = new Date(Date.now() - 60_000);
    await publish(orgCreated(orgId, createdAt));

    await eventually(async () => (await licenseRows(orgId)).length === 1);
    const { license } = await client.getLicense({ orgId });

    expect(license).toEqual({
      orgId,
      plan: Plan.PLAN_NONE,
      status: LicenseStatus.LICENSE_STATUS_PENDING,
      billingCycle: BillingCycle.BILLING_CYCLE_MONTHLY,
      expiresAt: new Date(createdAt.getTime() + 14 * DAY_MS),
    });
  });

  it('answers GetLicense before the event, and the later event changes nothing', async () => {
    const orgId = randomUUID();
    const before = Date.now();
    const { license: first } = await client.getLicense({ orgId });
    expect(first?.status).toBe(LicenseStatus.LICENSE_STATUS_PENDING);
    expect(first?.plan).toBe(Plan.PLAN_NONE);
    expect(first?.expiresAt?.getTime()).toBeGreaterThanOrEqual(before + 14 * DAY_MS);
    expect(first?.expiresAt?.getTime()).toBeLessThanOrEqual(Date.now() + 14 * DAY_MS);

    const event = orgCreated(orgId, new Date(before - 3 * DAY_MS));
    await publish(event);
    await eventually(() => processed(event.id));

    expect((await client.getLicense({ orgId })).license).toEqual(first);
    expect(await licenseRows(orgId)).toHaveLength(1);
  });

  it('handles duplicate events harmlessly', async () => {
    const orgId = randomUUID();
    const event = orgCreated(orgId, new Date());
    await publish(event);
    await publish(event); // same Nats-Msg-Id: dropped by the stream
    // Without a message id the stream keeps a second copy: the consumer's ledger skips it.
    await nats.js.publish(eventSubject(namespace, 'org.created'), JSON.stringify(event));
    const later = orgCreated(orgId, new Date(Date.now() + DAY_MS));
    await publish(later);
    await eventually(() => processed(later.id));

    expect(await licenseRows(orgId)).toHaveLength(1);
    expect((await client.getLicense({ orgId })).license?.expiresAt).toEqual(
      new Date(new Date(event.data.created_at).getTime() + 14 * DAY_MS),
    );
  });

  it('creates one license under concurrent first reads', async () => {
    const orgId = randomUUID();
    const results = await Promise.all(Array.from({ length: 8 }, () => client.getLicense({ orgId })));
    expect(new Set(results.map((r) => r.license?.expiresAt?.getTime())).size).toBe(1);
    expect(await licenseRows(orgId)).toHaveLength(1);
  });

  it('requires an organization id', async () => {
    const error = await client.getLicense({ orgId: '' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('VALIDATION_FAILED');
  });
});

describe('billing service with Stripe (PostgreSQL, NATS, a Stripe stand-in)', () => {
  const serviceAuth = testServiceAuth();
  const logger = createLogger('billing-int', 'silent');
  const namespace = uniqueNatsNamespace('bills');
  const webhookSecret = 'whsec_int_test_secret';
  let database: TestDatabase;
  let stripe: StripeStandIn;
  let service: RunningService;
  let client: ReturnType<typeof createPromiseClient<typeof BillingServiceService>>;
  let nats: JetStreamConnection;

  beforeAll(async () => {
    database = await createTestDatabase('billing_stripe');
    stripe = await startStripeStandIn();
    service = await startBillingService(
      stripeConfig({
        STRIPE_SECRET_KEY: stripe.apiKey,
        STRIPE_WEBHOOK_SECRET: webhookSecret,
        STRIPE_API_BASE: stripe.url,
      }),
      logger,
    );
    client = createPromiseClient(
      BillingServiceService,
      `127.0.0.1:${service.grpcPort}`,
      15_000,
      serviceAuth.as('billing'),
    );
    nats = await connectJetStream({ url: NATS_URL, name: 'billing-stripe-int-test', logger });
  });

  afterAll(async () => {
    client?.close();
    await service?.stop();
    await stripe?.close();
    if (nats) {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
    await database?.drop();
  });

  /** Billing's configuration in this test's database and namespace, with the given Stripe variables. */
  function stripeConfig(stripeEnv: Record<string, string>) {
    return loadConfig(
      billingEnvSchema,
      Object.assign(
        {
          DATABASE_URL: database.url,
          NATS_URL,
          NATS_NAMESPACE: namespace,
          GRPC_PORT: '0',
          ...serviceAuth.envOf('billing'),
          LOG_LEVEL: 'silent',
        },
        stripeEnv,
      ),
    );
  }

  const deliver = (event: StripeEvent) => {
    const { payload, signature } = stripe.signed(event, webhookSecret);
    return client.handlePaymentEvent({ payload: Buffer.from(payload), signature });
  };
  const at = (secondsAgo: number) => new Date(Date.now() - secondsAgo * 1000);

  /** An organization that started a checkout, and the subscription Stripe made when it paid. */
  async function paid(orgId: string, lookup = 'pro_annual') {
    const [plan, cycle] = lookup.split('_') as ['pro', 'annual'];
    const { url } = await client.createCheckoutSession({
      orgId,
      plan: { basic: Plan.PLAN_BASIC, pro: Plan.PLAN_PRO, enterprise: Plan.PLAN_ENTERPRISE }[plan],
      billingCycle:
        cycle === 'annual' ? BillingCycle.BILLING_CYCLE_ANNUAL : BillingCycle.BILLING_CYCLE_MONTHLY,
      requestedByEmail: 'admin@int.test',
    });
    return stripe.completeCheckout(url.split('/').pop()!, {
      currentPeriodEnd: new Date(Math.floor(Date.now() / 1000 + 30 * 86_400) * 1000),
    });
  }

  it('activates on subscription.updated that arrives before checkout.session.completed, and keeps its newer facts', async () => {
    const orgId = randomUUID();
    const { session, subscription } = await paid(orgId, 'basic_monthly');
    const completed = stripe.event('checkout.session.completed', session, { created: at(20) });
    const upgraded = stripe.updateSubscription(subscription.id, { lookupKey: 'enterprise_annual' });
    const updated = stripe.event('customer.subscription.updated', upgraded, { created: at(10) });

    // A live subscription of the organization's customer activates the onboarding license; the late
    // checkout then finds it so (it read the same subscription from Stripe).
    expect(await deliver(updated)).toEqual({ orgId, outcome: 'applied' });
    expect(await deliver(completed)).toEqual({ orgId, outcome: 'ignored' });
    const { license } = await client.getLicense({ orgId });
    expect(license).toMatchObject({
      plan: Plan.PLAN_ENTERPRISE,
      status: LicenseStatus.LICENSE_STATUS_ACTIVE,
    });
  });

  it('lets no older update overwrite a newer one, and answers replays as duplicates', async () => {
    const orgId = randomUUID();
    const { session, subscription } = await paid(orgId, 'pro_monthly');
    await deliver(stripe.event('checkout.session.completed', session, { created: at(60) }));
    const older = stripe.event(
      'customer.subscription.updated',
      stripe.updateSubscription(subscription.id, { lookupKey: 'basic_monthly' }),
      { created: at(30) },
    );
    const newer = stripe.event(
      'customer.subscription.updated',
      stripe.updateSubscription(subscription.id, {
        lookupKey: 'enterprise_monthly',
        cancelAtPeriodEnd: true,
      }),
      { created: at(20) },
    );
    expect(await deliver(newer)).toEqual({ orgId, outcome: 'applied' });
    expect(await deliver(older)).toEqual({ orgId, outcome: 'ignored' });
    expect(await deliver(newer)).toEqual({ orgId, outcome: 'duplicate' });
    expect((await client.getLicense({ orgId })).license?.plan).toBe(Plan.PLAN_ENTERPRISE);
  });

  it('takes the license out of service when the subscription becomes unpaid or paused, and back when it is paid', async () => {
    const orgId = randomUUID();
    const { session, subscription } = await paid(orgId);
    const status = async () => (await client.getLicense({ orgId })).license?.status;
    expect(await deliver(stripe.event('checkout.session.completed', session, { created: at(60) }))).toEqual({
      orgId,
      outcome: 'applied',
    });
    expect(await status()).toBe(LicenseStatus.LICENSE_STATUS_ACTIVE);

    // Stripe gave up retrying the renewal: the subscription is unpaid.
    const unpaid = stripe.updateSubscription(subscription.id, { status: 'unpaid' });
    expect(await deliver(stripe.event('customer.subscription.updated', unpaid, { created: at(50) }))).toEqual(
      {
        orgId,
        outcome: 'applied',
      },
    );
    expect(await status()).toBe(LicenseStatus.LICENSE_STATUS_CANCELED);
    const refused = await client
      .createCheckoutSession({
        orgId,
        plan: Plan.PLAN_PRO,
        billingCycle: BillingCycle.BILLING_CYCLE_ANNUAL,
        requestedByEmail: 'admin@int.test',
      })
      .catch((e: unknown) => e);
    expect((refused as AppError).code).toBe('SUBSCRIPTION_ALREADY_ACTIVE');

    // The open invoice is paid in the portal: billing reads the subscription, live again.
    stripe.updateSubscription(subscription.id, { status: 'active' });
    const invoice = stripe.createInvoice(subscription.id, { paid: true });
    expect(await deliver(stripe.event('invoice.payment_succeeded', invoice, { created: at(40) }))).toEqual({
      orgId,
      outcome: 'applied',
    });
    expect(await status()).toBe(LicenseStatus.LICENSE_STATUS_ACTIVE);

    const paused = stripe.updateSubscription(subscription.id, { status: 'paused' });
    expect(await deliver(stripe.event('customer.subscription.updated', paused, { created: at(30) }))).toEqual(
      {
        orgId,
        outcome: 'applied',
      },
    );
    expect(await status()).toBe(LicenseStatus.LICENSE_STATUS_CANCELED);
  });

  it('writes billing.updated to the outbox, and the relay publishes it', async () => {
    const orgId = randomUUID();
    const { session } = await paid(orgId);
    await deliver(stripe.event('checkout.session.completed', session));
    const db = new Client({ connectionString: database.url });
    await db.connect();
    try {
      await eventually(async () => {
        const rows = await db.query<{ summary: string; published: boolean }>(
          `select envelope->'data'->>'summary' as summary, published_at is not null as published
             from billing.outbox where envelope->'data'->>'org_id' = $1 order by created_at`,
          [orgId],
        );
        return (
          JSON.stringify(rows.rows) ===
          JSON.stringify([
            { summary: 'Checkout started: Pro, billed yearly', published: true },
            { summary: 'Subscription active: Pro, billed yearly', published: true },
          ])
        );
      });
    } finally {
      await db.end();
    }
  });

  it("accepts a delivery signed within Stripe's 5 minutes, refuses an older one and changes nothing", async () => {
    const orgId = randomUUID();
    const { session } = await paid(orgId);
    const event = stripe.event('checkout.session.completed', session);
    const signedAgo = (seconds: number) => {
      const { payload, signature } = stripe.signed(event, webhookSecret, {
        timestamp: Math.floor(Date.now() / 1000) - seconds,
      });
      return client.handlePaymentEvent({ payload: Buffer.from(payload), signature });
    };
    // A replay of a captured delivery, six minutes later.
    const stale = await signedAgo(360).catch((e: unknown) => e);
    expect((stale as AppError).code).toBe('WEBHOOK_SIGNATURE_INVALID');
    expect((await client.getLicense({ orgId })).license?.status).toBe(
      LicenseStatus.LICENSE_STATUS_ONBOARDING,
    );
    // Stripe retries a delivery that waited in a queue: a minute old is fine.
    expect(await signedAgo(60)).toEqual({ orgId, outcome: 'applied' });
  });

  it('refuses a webhook when no signing secret is configured, and changes nothing', async () => {
    const noSecret = await startBillingService(
      stripeConfig({ STRIPE_SECRET_KEY: stripe.apiKey, STRIPE_API_BASE: stripe.url }),
      logger,
    );
    const other = createPromiseClient(
      BillingServiceService,
      `127.0.0.1:${noSecret.grpcPort}`,
      5_000,
      serviceAuth.as('billing'),
    );
    try {
      const orgId = randomUUID();
      const { session } = await paid(orgId);
      const event = stripe.event('checkout.session.completed', session);
      const { payload, signature } = stripe.signed(event, webhookSecret);
      const error = await other
        .handlePaymentEvent({ payload: Buffer.from(payload), signature })
        .catch((e: unknown) => e);
      expect((error as AppError).code).toBe('BILLING_NOT_CONFIGURED');
      expect((await client.getLicense({ orgId })).license?.status).toBe(
        LicenseStatus.LICENSE_STATUS_ONBOARDING,
      );
      // The same event through a configured billing is applied: it was not taken as handled.
      expect(await deliver(event)).toEqual({ orgId, outcome: 'applied' });
    } finally {
      other.close();
      await noSecret.stop();
    }
  });
});
