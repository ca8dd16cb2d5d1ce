import { AppError } from '@sts/errors/app-error';
import {
  describePlan,
  initialLicense,
  type BillingCycle,
  type LicenseRecord,
  type Plan,
} from './billing-model';
import type { BillingAccount, BillingStore, Clock, PaymentProvider } from './billing-ports';

export interface BillingSettings {
  /** Base address of the dashboard: checkout and portal send people back there. */
  publicAppUrl: string;
}

function requireOrgId(orgId: string): void {
  if (!orgId.trim()) {
    throw new AppError('VALIDATION_FAILED', 'org_id is required', {
      fields: [{ path: 'org_id', message: 'required' }],
    });
  }
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
    requireOrgId(orgId);
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
   * so); an active one refuses, so that no one pays twice: plan changes go through the portal.
   * The provider is asked first and the license changed last, so a provider failure changes nothing.
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
    if (license.status === 'active') {
      throw new AppError(
        'SUBSCRIPTION_ALREADY_ACTIVE',
        `The organization has an active ${describePlan(license.plan, license.billingCycle)} subscription`,
      );
    }
    const account = await this.accountFor(provider, request.orgId, request.requestedByEmail);
    const priceId = await provider.priceOf(request.plan, request.cycle);
    const base = this.settings.publicAppUrl.replace(/\/+$/, '');
    const url = await provider.createCheckoutSession({
      orgId: request.orgId,
      customerId: account.customerId,
      priceId,
      successUrl: `${base}/billing?checkout=success`,
      cancelUrl: `${base}/billing?checkout=canceled`,
    });
    await this.store.transaction(async (repos) => {
      const current = await repos.findLicenseForUpdate(request.orgId);
      if (!current || (current.status !== 'pending' && current.status !== 'canceled')) return;
      const onboarding = { ...current, status: 'onboarding' as const, updatedAt: this.clock.now() };
      await repos.saveLicense(onboarding);
      await repos.emit('billing.updated', {
        org_id: onboarding.orgId,
        plan: onboarding.plan,
        status: onboarding.status,
        billing_cycle: onboarding.billingCycle,
        expires_at: onboarding.expiresAt.toISOString(),
        summary: `Checkout started: ${describePlan(request.plan, request.cycle)}`,
      });
    });
    return url;
  }

  /** A customer portal session; only for an organization that has a customer (it checked out once). */
  async openPortal(orgId: string): Promise<string> {
    requireOrgId(orgId);
    const provider = requirePaymentProvider(this.provider);
    const account = await this.store.read((repos) => repos.findAccount(orgId));
    if (!account) {
      throw new AppError('BILLING_ACCOUNT_NOT_FOUND', 'The organization never started a checkout');
    }
    return provider.createPortalSession({
      customerId: account.customerId,
      returnUrl: `${this.settings.publicAppUrl.replace(/\/+$/, '')}/billing`,
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
      await repos.insertAccountIfAbsent({ orgId, customerId });
      const account = await repos.findAccount(orgId);
      if (!account) throw new Error(`billing account of organization ${orgId} vanished after insert`);
      return account;
    });
  }
}
