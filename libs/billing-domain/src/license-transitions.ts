import { describePlan, type BillingCycle, type LicenseRecord, type Plan } from './billing-model';

/** Stripe's subscription statuses. */
export type SubscriptionStatus =
  | 'active'
  | 'trialing'
  | 'past_due'
  | 'unpaid'
  | 'paused'
  | 'incomplete'
  | 'incomplete_expired'
  | 'canceled';

/** The statuses of a subscription that is paid for (or being retried): it backs an active license. */
const LIVE: ReadonlySet<SubscriptionStatus> = new Set(['active', 'trialing', 'past_due']);

/** A subscription as Stripe's API describes it (fetched, not taken from a possibly stale payload). */
export interface SubscriptionFacts {
  id: string;
  status: SubscriptionStatus;
  plan: Exclude<Plan, 'none'>;
  cycle: BillingCycle;
  currentPeriodEnd: Date;
  /** When a cancellation made in the portal takes effect; null when none is pending. */
  endsAt: Date | null;
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

const ignore = (reason: string): LicenseDecision => ({ kind: 'ignore', reason });

/** The time of the newest facts applied: an event's facts never make it older. */
const newestOf = (factsAsOf: Date | null, createdAt: Date) =>
  factsAsOf && factsAsOf > createdAt ? factsAsOf : createdAt;

const isOlder = (license: LicenseRecord, createdAt: Date) =>
  license.factsAsOf !== null && createdAt < license.factsAsOf;

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
    cancelAtPeriodEnd: facts.endsAt !== null,
    factsAsOf: newestOf(license.factsAsOf, createdAt),
    updatedAt: at,
  };
}

const sameFacts = (a: LicenseRecord, b: LicenseRecord) =>
  a.status === b.status &&
  a.plan === b.plan &&
  a.billingCycle === b.billingCycle &&
  a.expiresAt.getTime() === b.expiresAt.getTime() &&
  a.subscriptionId === b.subscriptionId &&
  a.cancelAtPeriodEnd === b.cancelAtPeriodEnd;

/** The license activated with the subscription's facts (a checkout, or a payment that completed later). */
function activate(
  license: LicenseRecord,
  facts: SubscriptionFacts,
  createdAt: Date,
  now: Date,
): LicenseDecision {
  const next: LicenseRecord = { ...withFacts(license, facts, createdAt, now), status: 'active' };
  if (sameFacts(next, license)) return ignore('already active with these facts');
  return {
    kind: 'change',
    license: next,
    summary: `Subscription active: ${describePlan(facts.plan, facts.cycle)}`,
  };
}

/**
 * The license after a payment event (contract section 3; DESIGN section 3 "License"). `eventCreatedAt`
 * is the event's `created` (whole seconds); `factsAsOf` the newest one applied, so an older event never
 * overwrites newer facts.
 * - `checkout.session.completed` activates the license with a live subscription's plan, cycle and
 *   period end, unless the event is older than what was applied and names another subscription (a
 *   stale checkout) or the license was canceled after it;
 * - `invoice.payment_succeeded` renews an active license of the same subscription (the period end
 *   never moves back); a renewal of a canceled, pending or onboarding license changes nothing;
 * - `invoice.payment_failed` changes nothing and is told to the organization;
 * - `customer.subscription.updated` keeps plan, cycle, period end and a pending cancellation in step
 *   for the license's own subscription, if it is not older than what was applied; for an onboarding
 *   license without a subscription, a live one activates it (a payment that completed after checkout);
 * - `customer.subscription.deleted` cancels the license of that subscription only.
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
      const subscription = fact.subscription;
      if (!LIVE.has(subscription.status))
        return ignore(`subscription ${subscription.id} is ${subscription.status}`);
      if (isOlder(license, eventCreatedAt)) {
        if (license.subscriptionId !== subscription.id)
          return ignore('an older checkout of another subscription');
        if (license.status === 'canceled') return ignore('the license was canceled after this checkout');
      }
      return activate(license, subscription, eventCreatedAt, now);
    }
    case 'invoice.payment_succeeded': {
      if (license.status !== 'active') return ignore(`a renewal of a ${license.status} license`);
      if (license.subscriptionId !== fact.subscription.id) return ignore('a renewal of another subscription');
      if (fact.subscription.currentPeriodEnd <= license.expiresAt)
        return ignore('the period was already renewed');
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
        return ignore('a failed payment of another subscription');
      }
      return { kind: 'notify-payment-failed' };
    case 'customer.subscription.updated': {
      const subscription = fact.subscription;
      if (license.subscriptionId === null) {
        if (
          license.status === 'onboarding' &&
          LIVE.has(subscription.status) &&
          !isOlder(license, eventCreatedAt)
        ) {
          return activate(license, subscription, eventCreatedAt, now);
        }
        return ignore(`an update of subscription ${subscription.id} before the license has one`);
      }
      if (license.subscriptionId !== subscription.id) return ignore('an update of another subscription');
      if (license.status === 'canceled') return ignore('an update of a canceled subscription');
      if (isOlder(license, eventCreatedAt)) return ignore('older than the facts applied');
      const next = withFacts(license, subscription, eventCreatedAt, now);
      if (sameFacts(next, license)) return ignore('nothing changed');
      return {
        kind: 'change',
        license: next,
        summary: subscription.endsAt
          ? `Subscription ends on ${subscription.endsAt.toISOString().slice(0, 10)}`
          : `Subscription changed: ${describePlan(subscription.plan, subscription.cycle)}`,
      };
    }
    case 'customer.subscription.deleted': {
      if (license.subscriptionId !== fact.subscriptionId) return ignore('a deletion of another subscription');
      if (license.status === 'canceled') return ignore('already canceled');
      return {
        kind: 'change',
        license: {
          ...license,
          status: 'canceled',
          cancelAtPeriodEnd: false,
          factsAsOf: newestOf(license.factsAsOf, eventCreatedAt),
          updatedAt: now,
        },
        summary: 'Subscription canceled',
      };
    }
  }
}
