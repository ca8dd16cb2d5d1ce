import { describePlan, type BillingCycle, type LicenseRecord, type Plan } from './billing-model';

/** A subscription as Stripe's API describes it now (fetched, not taken from a possibly stale payload). */
export interface SubscriptionFacts {
  id: string;
  plan: Exclude<Plan, 'none'>;
  cycle: BillingCycle;
  currentPeriodEnd: Date;
  cancelAtPeriodEnd: boolean;
}

/** The payment events of contract section 6 that billing acts on, reduced to what the rules need. */
export type PaymentFact =
  | { type: 'checkout.session.completed'; subscription: SubscriptionFacts }
  | { type: 'invoice.payment_succeeded'; subscription: SubscriptionFacts }
  | { type: 'invoice.payment_failed'; subscriptionId: string | null }
  | { type: 'customer.subscription.updated'; subscription: SubscriptionFacts }
  | { type: 'customer.subscription.deleted'; subscriptionId: string };

export type LicenseDecision =
  /** Store the new license and emit `billing.updated` (its feed item). */
  | { kind: 'change'; license: LicenseRecord; summary: string }
  /** No state change; tell the organization (feed item and e-mail to its admins). */
  | { kind: 'notify-payment-failed' }
  /** Nothing to do (logged with the reason). */
  | { kind: 'ignore'; reason: string };

function withFacts(
  license: LicenseRecord,
  facts: SubscriptionFacts,
  createdAt: Date,
  at: Date,
): LicenseRecord {
  return {
    ...license,
    plan: facts.plan,
    billingCycle: facts.cycle,
    expiresAt: facts.currentPeriodEnd,
    subscriptionId: facts.id,
    cancelAtPeriodEnd: facts.cancelAtPeriodEnd,
    factsAsOf: license.factsAsOf && license.factsAsOf > createdAt ? license.factsAsOf : createdAt,
    updatedAt: at,
  };
}

const isOlder = (license: LicenseRecord, createdAt: Date) =>
  license.factsAsOf !== null && createdAt < license.factsAsOf;

/**
 * The license after a payment event (contract section 3; DESIGN section 3 "License"):
 * - `checkout.session.completed` activates the license with the subscription's plan, cycle and period
 *   end, unless the license was canceled by a later event (a deletion that happened after it);
 * - `invoice.payment_succeeded` renews an active license of the same subscription (the period end
 *   never moves back); a renewal of a canceled, pending or onboarding license changes nothing;
 * - `invoice.payment_failed` changes nothing and is told to the organization;
 * - `customer.subscription.updated` keeps plan, cycle, period end and a pending cancellation in step
 *   for the license's own subscription, if it is not older than what was applied;
 * - `customer.subscription.deleted` cancels the license of that subscription (a deletion of an earlier
 *   subscription leaves a newer one alone).
 * Replays are the ledger's business (each event id once); this decides on order and relevance.
 */
export function decideLicense(
  license: LicenseRecord,
  fact: PaymentFact,
  eventCreatedAt: Date,
  now: Date,
): LicenseDecision {
  switch (fact.type) {
    case 'checkout.session.completed': {
      if (license.status === 'canceled' && isOlder(license, eventCreatedAt)) {
        return { kind: 'ignore', reason: 'the license was canceled after this checkout' };
      }
      const next = withFacts(license, fact.subscription, eventCreatedAt, now);
      // Facts newer than this event's (an update applied first) stay.
      const facts =
        isOlder(license, eventCreatedAt) && license.subscriptionId === fact.subscription.id ? license : next;
      return {
        kind: 'change',
        license: {
          ...next,
          plan: facts.plan,
          billingCycle: facts.billingCycle,
          expiresAt: facts.expiresAt,
          cancelAtPeriodEnd: facts.cancelAtPeriodEnd,
          status: 'active',
        },
        summary: `Subscription active: ${describePlan(fact.subscription.plan, fact.subscription.cycle)}`,
      };
    }
    case 'invoice.payment_succeeded': {
      if (license.status !== 'active')
        return { kind: 'ignore', reason: `a renewal of a ${license.status} license` };
      if (license.subscriptionId !== fact.subscription.id) {
        return { kind: 'ignore', reason: 'a renewal of another subscription' };
      }
      if (fact.subscription.currentPeriodEnd <= license.expiresAt) {
        return { kind: 'ignore', reason: 'the period was already renewed' };
      }
      return {
        kind: 'change',
        license: { ...withFacts(license, fact.subscription, eventCreatedAt, now), status: 'active' },
        summary: `Subscription renewed until ${fact.subscription.currentPeriodEnd.toISOString().slice(0, 10)}`,
      };
    }
    case 'invoice.payment_failed':
      if (
        fact.subscriptionId !== null &&
        license.subscriptionId !== null &&
        fact.subscriptionId !== license.subscriptionId
      ) {
        return { kind: 'ignore', reason: 'a failed payment of another subscription' };
      }
      return { kind: 'notify-payment-failed' };
    case 'customer.subscription.updated': {
      if (license.subscriptionId !== fact.subscription.id) {
        return {
          kind: 'ignore',
          reason: 'an update of another subscription (or before its checkout completed)',
        };
      }
      if (license.status === 'canceled')
        return { kind: 'ignore', reason: 'an update of a canceled subscription' };
      if (isOlder(license, eventCreatedAt)) return { kind: 'ignore', reason: 'older than the facts applied' };
      const next = withFacts(license, fact.subscription, eventCreatedAt, now);
      const same =
        next.plan === license.plan &&
        next.billingCycle === license.billingCycle &&
        next.expiresAt.getTime() === license.expiresAt.getTime() &&
        next.cancelAtPeriodEnd === license.cancelAtPeriodEnd;
      if (same) return { kind: 'ignore', reason: 'nothing changed' };
      return {
        kind: 'change',
        license: next,
        summary: next.cancelAtPeriodEnd
          ? `Subscription ends on ${next.expiresAt.toISOString().slice(0, 10)}`
          : `Subscription changed: ${describePlan(fact.subscription.plan, fact.subscription.cycle)}`,
      };
    }
    case 'customer.subscription.deleted': {
      if (license.subscriptionId !== null && license.subscriptionId !== fact.subscriptionId) {
        return { kind: 'ignore', reason: 'a deletion of another subscription' };
      }
      if (license.status === 'canceled') return { kind: 'ignore', reason: 'already canceled' };
      return {
        kind: 'change',
        license: {
          ...license,
          status: 'canceled',
          cancelAtPeriodEnd: false,
          factsAsOf:
            license.factsAsOf && license.factsAsOf > eventCreatedAt ? license.factsAsOf : eventCreatedAt,
          updatedAt: now,
        },
        summary: 'Subscription canceled',
      };
    }
  }
}
