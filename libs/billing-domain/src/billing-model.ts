import type { EventData } from '@sts/events/event-catalogue';

/** License values of contract section 2 (Session.license). */
export const PLANS = ['none', 'basic', 'pro', 'enterprise'] as const;
export const LICENSE_STATUSES = ['pending', 'onboarding', 'active', 'canceled'] as const;
export const BILLING_CYCLES = ['monthly', 'annual'] as const;

export type Plan = (typeof PLANS)[number];
export type LicenseStatus = (typeof LICENSE_STATUSES)[number];
export type BillingCycle = (typeof BILLING_CYCLES)[number];

/** Stripe's subscription statuses. */
export const SUBSCRIPTION_STATUSES = [
  'active',
  'trialing',
  'past_due',
  'unpaid',
  'paused',
  'incomplete',
  'incomplete_expired',
  'canceled',
] as const;

export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

/** The license of one organization; there is exactly one per organization. */
export interface License {
  orgId: string;
  plan: Plan;
  status: LicenseStatus;
  billingCycle: BillingCycle;
  expiresAt: Date;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * What billing knows of the organization's Stripe subscription, besides the contract's license
 * fields. `factsAsOf` is the Stripe `created` time of the newest event whose facts were applied: an
 * older event's facts never overwrite them (events arrive late and out of order).
 * `subscriptionStatus` is Stripe's status of that subscription as last applied (null before the
 * first, and for licenses stored before it was kept; a move that neither starts nor ends `unpaid` or
 * `paused`, such as `active` to `past_due`, is not stored on its own): it tells a license suspended because its subscription is `unpaid` or
 * `paused` (which comes back when the subscription does) from one whose subscription was deleted
 * (which never does).
 */
export interface LicenseRecord extends License {
  subscriptionId: string | null;
  subscriptionStatus: SubscriptionStatus | null;
  cancelAtPeriodEnd: boolean;
  factsAsOf: Date | null;
}

/** The data of `billing.updated`: the license as it is now, and one line for people. */
export function billingUpdatedData(license: LicenseRecord, summary: string): EventData<'billing.updated'> {
  return {
    org_id: license.orgId,
    plan: license.plan,
    status: license.status,
    billing_cycle: license.billingCycle,
    expires_at: license.expiresAt.toISOString(),
    summary,
  };
}

/** How people read a plan and a cycle in feed items and e-mails. */
export const PLAN_NAMES: Record<Plan, string> = {
  none: 'no plan',
  basic: 'Basic',
  pro: 'Pro',
  enterprise: 'Enterprise',
};

export function describePlan(plan: Plan, cycle: BillingCycle): string {
  return `${PLAN_NAMES[plan]}, billed ${cycle === 'annual' ? 'yearly' : 'monthly'}`;
}

/**
 * A new organization's license is `pending` with plan `none` until a checkout starts. The contract
 * types `expires_at` as a string, never null, so a pending license carries the end of an evaluation
 * window: 14 days after the license was created.
 */
export const EVALUATION_PERIOD_DAYS = 14;

const DAY_MS = 24 * 60 * 60 * 1000;

export function initialLicense(orgId: string, createdAt: Date): LicenseRecord {
  return {
    orgId,
    plan: 'none',
    status: 'pending',
    billingCycle: 'monthly',
    expiresAt: new Date(createdAt.getTime() + EVALUATION_PERIOD_DAYS * DAY_MS),
    createdAt,
    updatedAt: createdAt,
    subscriptionId: null,
    subscriptionStatus: null,
    cancelAtPeriodEnd: false,
    factsAsOf: null,
  };
}
