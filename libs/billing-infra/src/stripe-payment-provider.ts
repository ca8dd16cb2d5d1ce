import Stripe from 'stripe';
import { z } from 'zod';
import { SUBSCRIPTION_STATUSES, type BillingCycle, type Plan } from '@sts/billing-domain/billing-model';
import type { PaymentProvider } from '@sts/billing-domain/billing-ports';
import type { PaymentEvent, ProviderSubscription } from '@sts/billing-domain/payment-events';
import { AppError } from '@sts/errors/app-error';
import type { Logger } from '@sts/logger/create-logger';
import { STRIPE_SIGNATURE_TOLERANCE_SECONDS } from '@sts/vocabulary/stripe-signature';

export interface StripeSettings {
  STRIPE_SECRET_KEY?: string | undefined;
  STRIPE_WEBHOOK_SECRET?: string | undefined;
  STRIPE_API_BASE: string;
  STRIPE_TIMEOUT_MS: number;
}

/** Stripe's SDK for our settings (pointed at STRIPE_API_BASE); null without a secret key. */
export function createStripeClient(settings: StripeSettings): Stripe | null {
  if (!settings.STRIPE_SECRET_KEY) return null;
  const base = new URL(settings.STRIPE_API_BASE);
  const protocol = base.protocol === 'http:' ? 'http' : 'https';
  return new Stripe(settings.STRIPE_SECRET_KEY, {
    host: base.hostname,
    port: base.port || (protocol === 'http' ? 80 : 443),
    protocol,
    timeout: settings.STRIPE_TIMEOUT_MS,
    // The SDK retries connection errors, 409s and 5xx once, with the same idempotency key: at most
    // two STRIPE_TIMEOUT_MS within the gateway's deadline for billing calls.
    maxNetworkRetries: 1,
    telemetry: false,
    appInfo: { name: 'security-telemetry-service' },
  });
}

/** Stripe's ids (`cus_…`, `sub_…`, `evt_…`): nothing else reaches SQL or a request path. */
const stripeId = z.string().regex(/^[A-Za-z0-9_]{1,255}$/, 'not a Stripe id');
/** An id, or an expanded object that has one (Stripe expands references on request). */
const reference = z.union([stripeId, z.object({ id: stripeId }).transform((o) => o.id)]);
/** Unix seconds that make a valid date (up to the year 9999). */
const unixSeconds = z.number().int().min(0).max(253_402_300_799);

const subscriptionSchema = z.object({
  id: stripeId,
  customer: reference,
  status: z.enum(SUBSCRIPTION_STATUSES),
  cancel_at_period_end: z.boolean(),
  cancel_at: unixSeconds.nullish(),
  /** Before API version 2025-03-31 the period was the subscription's; now it is each item's. */
  current_period_end: unixSeconds.nullish(),
  items: z.object({
    data: z
      .array(
        z.object({
          current_period_end: unixSeconds.nullish(),
          price: z.object({ lookup_key: z.string().nullish() }),
        }),
      )
      .min(1),
  }),
});

const checkoutSessionSchema = z.object({
  customer: reference.nullish(),
  subscription: reference.nullish(),
  mode: z.string(),
});

const invoiceSchema = z.object({
  customer: reference,
  amount_due: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  currency: z.string().regex(/^[a-zA-Z]{3}$/),
  hosted_invoice_url: z
    .url({ protocol: /^https?$/ })
    .max(2_048)
    .nullish(),
  next_payment_attempt: unixSeconds.nullish(),
  /** Where the invoice names its subscription since API version 2025-03-31 … */
  parent: z.object({ subscription_details: z.object({ subscription: reference }).nullish() }).nullish(),
  /** … and before it. */
  subscription: reference.nullish(),
});

const eventSchema = z.object({
  id: stripeId,
  type: z.string().min(1).max(200),
  created: unixSeconds,
  data: z.object({ object: z.record(z.string(), z.unknown()) }),
});

const PRICE_CACHE_MS = 10 * 60 * 1000;

const LOOKUP_KEY = /^(basic|pro|enterprise)_(monthly|annual)$/;

export function lookupKeyOf(plan: Exclude<Plan, 'none'>, cycle: BillingCycle): string {
  return `${plan}_${cycle}`;
}

function toProviderSubscription(subscription: z.infer<typeof subscriptionSchema>): ProviderSubscription {
  const [item] = subscription.items.data;
  const match = LOOKUP_KEY.exec(item?.price.lookup_key ?? '');
  const periodEnd = item?.current_period_end ?? subscription.current_period_end;
  return {
    id: subscription.id,
    customerId: subscription.customer,
    facts:
      match && periodEnd
        ? {
            id: subscription.id,
            plan: match[1] as Exclude<Plan, 'none'>,
            cycle: match[2] as BillingCycle,
            status: subscription.status,
            currentPeriodEnd: new Date(periodEnd * 1000),
            // The portal ends a subscription either at the period's end or at a set date.
            endsAt: subscription.cancel_at
              ? new Date(subscription.cancel_at * 1000)
              : subscription.cancel_at_period_end
                ? new Date(periodEnd * 1000)
                : null,
          }
        : null,
  };
}

function parse<Schema extends z.ZodType>(schema: Schema, value: unknown, what: string): z.infer<Schema> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new AppError('MALFORMED_REQUEST', `The ${what} is not shaped as Stripe sends it`, {
      fields: parsed.error.issues.slice(0, 5).map((issue) => ({
        path: issue.path.join('.'),
        message: issue.message,
      })),
    });
  }
  return parsed.data;
}

/** A verified event, reduced to what billing needs (contract section 6). */
export function toPaymentEvent(raw: unknown): PaymentEvent {
  const event = parse(eventSchema, raw, 'event');
  const base = { id: event.id, created: new Date(event.created * 1000) };
  const object = event.data.object;
  switch (event.type) {
    case 'checkout.session.completed': {
      const session = parse(checkoutSessionSchema, object, 'checkout session');
      if (!session.customer || session.mode !== 'subscription') {
        return { ...base, type: 'other', providerType: `${event.type} (${session.mode}, no subscription)` };
      }
      return {
        ...base,
        type: event.type,
        customerId: session.customer,
        subscriptionId: session.subscription ?? null,
      };
    }
    case 'invoice.payment_succeeded':
    case 'invoice.payment_failed': {
      const invoice = parse(invoiceSchema, object, 'invoice');
      const subscriptionId =
        invoice.parent?.subscription_details?.subscription ?? invoice.subscription ?? null;
      if (event.type === 'invoice.payment_succeeded') {
        return { ...base, type: event.type, customerId: invoice.customer, subscriptionId };
      }
      return {
        ...base,
        type: event.type,
        customerId: invoice.customer,
        subscriptionId,
        invoice: {
          amountDue: invoice.amount_due,
          currency: invoice.currency.toLowerCase(),
          url: invoice.hosted_invoice_url ?? null,
          nextAttemptAt: invoice.next_payment_attempt ? new Date(invoice.next_payment_attempt * 1000) : null,
        },
      };
    }
    case 'customer.subscription.updated': {
      const subscription = toProviderSubscription(parse(subscriptionSchema, object, 'subscription'));
      return { ...base, type: event.type, customerId: subscription.customerId, subscription };
    }
    case 'customer.subscription.deleted': {
      const subscription = parse(subscriptionSchema, object, 'subscription');
      return {
        ...base,
        type: event.type,
        customerId: subscription.customer,
        subscriptionId: subscription.id,
      };
    }
    default:
      return { ...base, type: 'other', providerType: event.type };
  }
}

/**
 * Stripe's failures in our error codes: what a retry may cure (no connection, Stripe's 5xx, rate
 * limits) is PAYMENT_PROVIDER_UNAVAILABLE (a webhook then answers 503 and Stripe sends it again); a
 * key Stripe refuses is BILLING_NOT_CONFIGURED; anything else is our bug.
 */
function providerError(error: unknown, what: string): Error {
  if (error instanceof AppError) return error;
  if (
    error instanceof Stripe.errors.StripeConnectionError ||
    error instanceof Stripe.errors.StripeAPIError ||
    error instanceof Stripe.errors.StripeRateLimitError ||
    (error instanceof Stripe.errors.StripeError && (error.statusCode ?? 0) >= 500)
  ) {
    return new AppError('PAYMENT_PROVIDER_UNAVAILABLE', `Stripe could not ${what}; try again`, {
      cause: error,
    });
  }
  if (
    error instanceof Stripe.errors.StripeAuthenticationError ||
    error instanceof Stripe.errors.StripePermissionError
  ) {
    return new AppError('BILLING_NOT_CONFIGURED', `Stripe refused the configured key (${what})`, {
      cause: error,
    });
  }
  return new Error(`Stripe could not ${what}`, { cause: error });
}

/** The object, or null when Stripe has no such object (its `resource_missing` error). */
async function nullIfMissing<T>(request: Promise<T>): Promise<T | null> {
  try {
    return await request;
  } catch (error) {
    if (error instanceof Stripe.errors.StripeInvalidRequestError && error.code === 'resource_missing')
      return null;
    throw error;
  }
}

/** PaymentProvider over Stripe's API (the official SDK for every call and for signatures). */
export class StripePaymentProvider implements PaymentProvider {
  /** Price ids by lookup key: prices change rarely, and a checkout then needs two calls instead of three. */
  private readonly prices = new Map<string, { priceId: string; until: number }>();

  constructor(
    private readonly stripe: Stripe,
    private readonly webhookSecret: string | undefined,
    private readonly logger: Logger,
  ) {}

  private async call<T>(what: string, request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (error) {
      const mapped = providerError(error, what);
      this.logger.warn({ err: error, what }, 'Stripe call failed');
      throw mapped;
    }
  }

  async createCustomer(request: { orgId: string; email: string | null }): Promise<string> {
    // One key per organization: a retried or concurrent first checkout gets the customer Stripe made the
    // first time (Stripe refuses one key with other parameters, so the admin's e-mail is set after). The
    // answer to a repeated key is the first one, without an e-mail, so every call that has one sets it.
    const customer = await this.call('create the customer', () =>
      this.stripe.customers.create(
        { metadata: { org_id: request.orgId } },
        { idempotencyKey: `customer-of-org-${request.orgId}` },
      ),
    );
    const email = request.email;
    if (email) {
      await this.call('set the customer e-mail', () => this.stripe.customers.update(customer.id, { email }));
    }
    return customer.id;
  }

  async priceOf(plan: Exclude<Plan, 'none'>, cycle: BillingCycle): Promise<string> {
    const lookupKey = lookupKeyOf(plan, cycle);
    const cached = this.prices.get(lookupKey);
    if (cached && cached.until > Date.now()) return cached.priceId;
    const prices = await this.call('find the price', () =>
      this.stripe.prices.list({ lookup_keys: [lookupKey], active: true, limit: 1 }),
    );
    const [price] = prices.data;
    if (!price) {
      throw new AppError('BILLING_NOT_CONFIGURED', `No active Stripe price has the lookup key ${lookupKey}`);
    }
    this.prices.set(lookupKey, { priceId: price.id, until: Date.now() + PRICE_CACHE_MS });
    return price.id;
  }

  async createCheckoutSession(request: {
    orgId: string;
    customerId: string;
    priceId: string;
    successUrl: string;
    cancelUrl: string;
  }): Promise<{ id: string; url: string }> {
    const session = await this.call('create the checkout session', () =>
      this.stripe.checkout.sessions.create({
        mode: 'subscription',
        customer: request.customerId,
        line_items: [{ price: request.priceId, quantity: 1 }],
        success_url: request.successUrl,
        cancel_url: request.cancelUrl,
        client_reference_id: request.orgId,
        metadata: { org_id: request.orgId },
        subscription_data: { metadata: { org_id: request.orgId } },
      }),
    );
    if (!session.url) throw new Error(`Stripe returned checkout session ${session.id} without a url`);
    return { id: session.id, url: session.url };
  }

  async closeCheckoutSession(sessionId: string): Promise<'closed' | 'paid'> {
    const session = await this.call('read the checkout session', () =>
      nullIfMissing(this.stripe.checkout.sessions.retrieve(sessionId)),
    );
    if (!session) return 'closed';
    if (session.status === 'complete') return 'paid';
    if (session.status === 'open') {
      await this.call('expire the checkout session', () => this.stripe.checkout.sessions.expire(sessionId));
    }
    return 'closed';
  }

  async createPortalSession(request: { customerId: string; returnUrl: string }): Promise<string> {
    const session = await this.call('create the portal session', () =>
      this.stripe.billingPortal.sessions.create({
        customer: request.customerId,
        return_url: request.returnUrl,
      }),
    );
    return session.url;
  }

  async retrieveSubscription(subscriptionId: string): Promise<ProviderSubscription | null> {
    const subscription = await this.call('read the subscription', () =>
      nullIfMissing(this.stripe.subscriptions.retrieve(subscriptionId)),
    );
    return subscription && toProviderSubscription(parse(subscriptionSchema, subscription, 'subscription'));
  }

  verifyEvent(payload: Uint8Array, signature: string): PaymentEvent {
    if (!this.webhookSecret) {
      throw new AppError(
        'BILLING_NOT_CONFIGURED',
        'The webhook signing secret (STRIPE_WEBHOOK_SECRET) is not set',
      );
    }
    let raw: unknown;
    try {
      // Stripe's own check: HMAC of `<timestamp>.<body>` against every v1 signature, within the tolerance
      // the gateway also checks before forwarding.
      raw = Stripe.webhooks.constructEvent(
        Buffer.from(payload),
        signature,
        this.webhookSecret,
        STRIPE_SIGNATURE_TOLERANCE_SECONDS,
      );
    } catch (error) {
      if (error instanceof Stripe.errors.StripeSignatureVerificationError) {
        throw new AppError(
          'WEBHOOK_SIGNATURE_INVALID',
          'The Stripe-Signature header does not verify this body',
        );
      }
      throw new AppError('MALFORMED_REQUEST', 'The signed body is not a JSON event');
    }
    return toPaymentEvent(raw);
  }
}
