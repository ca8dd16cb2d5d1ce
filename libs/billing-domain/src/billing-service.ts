import { AppError } from '@sts/errors/app-error';
import { trimSlashes } from '@sts/vocabulary/urls';
import {
  billingUpdatedData,
  describePlan,
  initialLicense,
  type BillingCycle,
  type LicenseRecord,
  type Plan,
} from './billing-model';
import type { BillingAccount, BillingStore, Clock, PaymentProvider } from './billing-ports';
import { isSuspended } from './license-transitions';

export interface BillingSettings {
  /** Base address of the dashboard: checkout and portal send people back there. */
  publicAppUrl: string;
}

function alreadyActive(license: LicenseRecord): AppError {
  return new AppError(
    'SUBSCRIPTION_ALREADY_ACTIVE',
    `The organization has an active ${describePlan(license.plan, license.billingCycle)} subscription`,
  );
}

/**
 * Why the organization may not start a checkout, if it may not: its license is active (a second
 * subscription would charge twice), or its subscription is unpaid, which still exists and still
 * bills; paying its open invoice in the portal makes the license active again. (A paused
 * subscription bills nothing, so its license may check out anew.)
 */
function checkoutRefusal(license: LicenseRecord): AppError | null {
  if (license.status === 'active') return alreadyActive(license);
  if (isSuspended(license) && license.subscriptionStatus === 'unpaid') {
    return new AppError(
      'SUBSCRIPTION_ALREADY_ACTIVE',
      `The organization's ${describePlan(license.plan, license.billingCycle)} subscription is unpaid; ` +
        'pay its open invoice in the billing portal',
    );
  }
  return null;
}

/** The provider, or `BILLING_NOT_CONFIGURED` (503) on a deployment without one. */
export function requirePaymentProvider(provider: PaymentProvider | null): PaymentProvider {
  if (!provider) throw new AppError('BILLING_NOT_CONFIGURED', 'Billing is not configured on this deployment');
  return provider;
}

export class BillingService {
  constructor(
    private readonly store: BillingStore,
    private readonly clock: Clock,
    /** Null when the deployment has no payment provider (no STRIPE_SECRET_KEY). */
    private readonly provider: PaymentProvider | null,
    private readonly settings: BillingSettings,
  ) {}

  /**
   * The organization's license. If `org.created` has not been handled yet, the initial license is
   * created now (insert if absent, then read), so a brand-new organization always has one and the
   * later event leaves it as it is.
   */
  async getLicense(orgId: string): Promise<LicenseRecord> {
    const existing = await this.store.read((repos) => repos.findLicense(orgId));
    if (existing) return existing;
    return this.store.transaction(async (repos) => {
      await repos.insertLicenseIfAbsent(initialLicense(orgId, this.clock.now()));
      const license = await repos.findLicense(orgId);
      if (!license) throw new Error(`license of organization ${orgId} vanished after insert`);
      return license;
    });
  }

  /**
   * A hosted checkout of one plan and cycle for the organization's customer (created at the first
   * checkout, reused after). A pending or canceled license moves to `onboarding` (and the feed says
   * so). No one pays twice: an active license refuses (plan changes go through the portal), so does
   * one whose subscription is unpaid (its open invoice is paid in the portal), and the
   * organization's previous checkout session is closed before a new one opens (refusing if it was
   * paid already). Stripe is asked first and the license changed last, so a Stripe failure changes nothing.
   */
  async startCheckout(request: {
    orgId: string;
    plan: Exclude<Plan, 'none'>;
    cycle: BillingCycle;
    /** Prefills the checkout for a new customer; null for a caller without one (a client credential). */
    requestedByEmail: string | null;
  }): Promise<string> {
    const provider = requirePaymentProvider(this.provider);
    const license = await this.getLicense(request.orgId);
    const refusal = checkoutRefusal(license);
    if (refusal) throw refusal;
    const account = await this.accountFor(provider, request.orgId, request.requestedByEmail);
    // A paid session of an onboarding license is a subscription whose activation is on its way (a
    // canceled license's paid session is history).
    const previous = account.checkoutSessionId
      ? await provider.closeCheckoutSession(account.checkoutSessionId)
      : 'closed';
    if (previous === 'paid' && license.status === 'onboarding') {
      throw new AppError(
        'SUBSCRIPTION_ALREADY_ACTIVE',
        "The organization's last checkout was paid; its subscription is being activated",
      );
    }
    const priceId = await provider.priceOf(request.plan, request.cycle);
    const base = trimSlashes(this.settings.publicAppUrl);
    const session = await provider.createCheckoutSession({
      orgId: request.orgId,
      customerId: account.customerId,
      priceId,
      successUrl: `${base}/billing?checkout=success`,
      cancelUrl: `${base}/billing?checkout=canceled`,
    });
    const outcome = await this.store.transaction(async (repos) => {
      const current = await repos.findLicenseForUpdate(request.orgId);
      if (!current) throw new Error(`license of organization ${request.orgId} vanished`);
      const refused = checkoutRefusal(current);
      if (refused) return { kind: 'refused' as const, error: refused };
      // Whatever session a concurrent checkout stored since is closed below: only the newest stays open.
      const stored = (await repos.findAccount(request.orgId))?.checkoutSessionId ?? null;
      await repos.saveCheckoutSession(request.orgId, session.id);
      if (current.status === 'pending' || current.status === 'canceled') {
        const onboarding = { ...current, status: 'onboarding' as const, updatedAt: this.clock.now() };
        await repos.saveLicense(onboarding);
        await repos.emit(
          'billing.updated',
          billingUpdatedData(onboarding, `Checkout started: ${describePlan(request.plan, request.cycle)}`),
        );
      }
      return { kind: 'started' as const, superseded: stored !== account.checkoutSessionId ? stored : null };
    });
    if (outcome.kind === 'refused') {
      // Activated while this checkout was being made (a webhook of another session): it must not be paid.
      await provider.closeCheckoutSession(session.id);
      throw outcome.error;
    }
    if (outcome.superseded) await provider.closeCheckoutSession(outcome.superseded);
    return session.url;
  }

  /** A customer portal session; only for an organization that has a customer (it checked out once). */
  async openPortal(orgId: string): Promise<string> {
    const provider = requirePaymentProvider(this.provider);
    const account = await this.store.read((repos) => repos.findAccount(orgId));
    if (!account) {
      throw new AppError('BILLING_ACCOUNT_NOT_FOUND', 'The organization never started a checkout');
    }
    return provider.createPortalSession({
      customerId: account.customerId,
      returnUrl: `${trimSlashes(this.settings.publicAppUrl)}/billing`,
    });
  }

  /**
   * The organization's account, created once: concurrent first checkouts ask the provider with the
   * same organization (which answers with one customer) and the first stored account wins.
   */
  private async accountFor(
    provider: PaymentProvider,
    orgId: string,
    email: string | null,
  ): Promise<BillingAccount> {
    const existing = await this.store.read((repos) => repos.findAccount(orgId));
    if (existing) return existing;
    const customerId = await provider.createCustomer({ orgId, email });
    return this.store.transaction(async (repos) => {
      await repos.insertAccountIfAbsent({ orgId, customerId, checkoutSessionId: null });
      const account = await repos.findAccount(orgId);
      if (!account) throw new Error(`billing account of organization ${orgId} vanished after insert`);
      return account;
    });
  }
}
