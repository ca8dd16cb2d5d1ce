import { stripeEvent } from '@sts/stand-ins/stripe-stand-in';

// Stripe's objects as its API sends them, for the Stripe adapter's unit and integration specs.

/** Unix seconds of an ISO instant, as Stripe writes timestamps. */
export const seconds = (iso: string): number => Date.parse(iso) / 1000;

export const CREATED = '2026-01-01T00:00:00.000Z';
export const PERIOD_END = '2027-01-01T00:00:00.000Z';
export const CANCEL_AT = '2026-07-01T00:00:00.000Z';

/** An event as Stripe sends it (the stand-in's builder: every field of Stripe's event object). */
export const eventOf = (type: string, object: unknown, id = 'evt_1QxYz2AbCdEfGhIj') =>
  stripeEvent(type, object, { id, created: new Date(CREATED) });

/** A subscription as Stripe's API version 2025-03-31 and later sends it: the period on its item. */
export function subscriptionObject(
  changes: Record<string, unknown> = {},
  item: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    id: 'sub_1QxYz2AbCdEfGhIj',
    object: 'subscription',
    cancel_at: null,
    cancel_at_period_end: false,
    canceled_at: null,
    created: seconds(CREATED),
    currency: 'usd',
    customer: 'cus_QxYz2AbCdEfGhIj',
    items: {
      object: 'list',
      data: [
        {
          id: 'si_QxYz2AbCdEfGhIj',
          object: 'subscription_item',
          current_period_start: seconds(CREATED),
          current_period_end: seconds(PERIOD_END),
          price: { id: 'price_1QxYz2', object: 'price', lookup_key: 'pro_annual', unit_amount: 29000 },
          quantity: 1,
          ...item,
        },
      ],
      has_more: false,
    },
    metadata: { org_id: 'org-1' },
    status: 'active',
    ...changes,
  };
}

/** An invoice of a subscription as Stripe sends it since API version 2025-03-31 (`parent`). */
export function invoiceObject(changes: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 'in_1QxYz2AbCdEfGhIj',
    object: 'invoice',
    amount_due: 2900,
    amount_paid: 0,
    currency: 'usd',
    customer: 'cus_QxYz2AbCdEfGhIj',
    hosted_invoice_url: 'https://invoice.stripe.com/i/acct_1/test_abc',
    next_payment_attempt: null,
    parent: {
      type: 'subscription_details',
      quote_details: null,
      subscription_details: { subscription: 'sub_1QxYz2AbCdEfGhIj', metadata: {} },
    },
    status: 'open',
    ...changes,
  };
}

export function checkoutSessionObject(changes: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 'cs_test_a1QxYz2AbCdEfGhIj',
    object: 'checkout.session',
    client_reference_id: 'org-1',
    customer: 'cus_QxYz2AbCdEfGhIj',
    mode: 'subscription',
    payment_status: 'paid',
    status: 'complete',
    subscription: 'sub_1QxYz2AbCdEfGhIj',
    url: null,
    ...changes,
  };
}

export const eventFields = { id: 'evt_1QxYz2AbCdEfGhIj', created: new Date(CREATED) };
