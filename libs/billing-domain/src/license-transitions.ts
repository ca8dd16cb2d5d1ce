import {
  describePlan,
  type BillingCycle,
  type LicenseRecord,
  type LicenseStatus,
  type Plan,
  type SubscriptionStatus,
} from './billing-model';

/** The statuses of a subscription that is paid for (or being retried): it backs an active license. */
const LIVE: ReadonlySet<SubscriptionStatus> = new Set(['active', 'trialing', 'past_due']);

/**
 * The statuses of a subscription that still exists but is not paid for: Stripe gave up retrying its
 * invoice (`unpaid`), or it is `paused`. Its license is not active (`canceled`, the contract's only
 * state for a license without service) until the subscription is live again.
 */
const SUSPENDED: ReadonlySet<SubscriptionStatus> = new Set(['unpaid', 'paused']);

/** The license's own subscription is unpaid or paused (it may come back; a deleted one never does). */
export function isSuspended(license: LicenseRecord): boolean {
  return (
    license.subscriptionId !== null &&
    license.subscriptionStatus !== null &&
    SUSPENDED.has(license.subscriptionStatus)
  );
}

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
    subscriptionStatus: facts.status,
    cancelAtPeriodEnd: facts.endsAt !== null,
    factsAsOf: newestOf(license.factsAsOf, createdAt),
    updatedAt: at,
  };
}

/**
 * A subscription status as far as the license cares: unpaid or paused, or neither (a move between
 * others, such as `active` to `past_due`, is no change to tell anyone about).
 */
const serviceOf = (status: SubscriptionStatus | null) =>
  status !== null && SUSPENDED.has(status) ? status : 'in service';

const sameFacts = (a: LicenseRecord, b: LicenseRecord) =>
  a.status === b.status &&
  a.plan === b.plan &&
  a.billingCycle === b.billingCycle &&
  a.expiresAt.getTime() === b.expiresAt.getTime() &&
  a.subscriptionId === b.subscriptionId &&
  serviceOf(a.subscriptionStatus) === serviceOf(b.subscriptionStatus) &&
  a.cancelAtPeriodEnd === b.cancelAtPeriodEnd;

/**
 * The license status that the status of the license's own subscription gives: a live subscription
 * makes the license active, an unpaid or paused one takes an active license out of service; others
 * (and a suspended subscription of a license that is not active) leave it as it is.
 */
function statusFollowing(current: LicenseStatus, subscription: SubscriptionStatus): LicenseStatus {
  if (LIVE.has(subscription)) return 'active';
  if (SUSPENDED.has(subscription) && current === 'active') return 'canceled';
  return current;
}

/** What the feed says when facts of the license's own subscription were applied. */
function summaryOf(before: LicenseRecord, after: LicenseRecord, facts: SubscriptionFacts): string {
  const plan = describePlan(facts.plan, facts.cycle);
  if (after.status === 'canceled' && before.status !== 'canceled') {
    return facts.status === 'unpaid'
      ? `Subscription suspended: ${plan} is unpaid; pay the open invoice in the billing portal`
      : `Subscription paused: ${plan}; resume it in the billing portal`;
  }
  if (after.status === 'active' && before.status !== 'active') return `Subscription active again: ${plan}`;
  if (after.status === 'canceled' && isSuspended(before) && !isSuspended(after))
    return 'Subscription canceled';
  return facts.endsAt
    ? `Subscription ends on ${facts.endsAt.toISOString().slice(0, 10)}`
    : `Subscription changed: ${plan}`;
}

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
    summary: `Subscription active${isSuspended(license) ? ' again' : ''}: ${describePlan(facts.plan, facts.cycle)}`,
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
 *   never moves back); a renewal of a canceled, pending or onboarding license changes nothing, except
 *   that a suspended license whose subscription is live again is active again;
 * - `invoice.payment_failed` changes nothing and is told to the organization;
 * - `customer.subscription.updated` keeps plan, cycle, period end and a pending cancellation in step
 *   for the license's own subscription, if it is not older than what was applied; for an onboarding
 *   license without a subscription, a live one activates it (a payment that completed after checkout);
 * - the license follows its own subscription's status: `unpaid` or `paused` takes an active license
 *   out of service (`canceled`, suspended: the contract has no other state without service), and the
 *   subscription live again (`active`, `trialing`, `past_due`) makes it active again;
 * - `customer.subscription.deleted` cancels the license of that subscription only (a suspended one
 *   too, for good).
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
        if (license.status === 'canceled' && !isSuspended(license))
          return ignore('the license was canceled after this checkout');
      }
      return activate(license, subscription, eventCreatedAt, now);
    }
    case 'invoice.payment_succeeded': {
      const subscription = fact.subscription;
      if (isSuspended(license) && license.subscriptionId === subscription.id) {
        // The subscription's state is read from Stripe: live means its open invoice was paid.
        if (!LIVE.has(subscription.status))
          return ignore(`a payment of subscription ${subscription.id}, still ${subscription.status}`);
        return activate(license, subscription, eventCreatedAt, now);
      }
      if (license.status !== 'active') return ignore(`a renewal of a ${license.status} license`);
      if (license.subscriptionId !== subscription.id) return ignore('a renewal of another subscription');
      if (subscription.currentPeriodEnd <= license.expiresAt) return ignore('the period was already renewed');
      const next = withFacts(license, subscription, eventCreatedAt, now);
      next.status = statusFollowing(license.status, subscription.status);
      return {
        kind: 'change',
        license: next,
        summary:
          next.status === 'active'
            ? `Subscription renewed until ${subscription.currentPeriodEnd.toISOString().slice(0, 10)}`
            : summaryOf(license, next, subscription),
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
      if (license.status === 'canceled' && !isSuspended(license))
        return ignore('an update of a canceled subscription');
      if (isOlder(license, eventCreatedAt)) return ignore('older than the facts applied');
      const next = withFacts(license, subscription, eventCreatedAt, now);
      next.status = statusFollowing(license.status, subscription.status);
      if (sameFacts(next, license)) return ignore('nothing changed');
      return { kind: 'change', license: next, summary: summaryOf(license, next, subscription) };
    }
    case 'customer.subscription.deleted': {
      if (license.subscriptionId !== fact.subscriptionId) return ignore('a deletion of another subscription');
      if (license.status === 'canceled' && !isSuspended(license)) return ignore('already canceled');
      return {
        kind: 'change',
        license: {
          ...license,
          status: 'canceled',
          subscriptionStatus: 'canceled',
          cancelAtPeriodEnd: false,
          factsAsOf: newestOf(license.factsAsOf, eventCreatedAt),
          updatedAt: now,
        },
        summary: 'Subscription canceled',
      };
    }
  }
}
