import { formatMoney } from '@sts/vocabulary/money';
import type { BillingRepositories, BillingStore, Clock, PaymentProvider } from './billing-ports';
import { billingUpdatedData, initialLicense, PLAN_NAMES, type LicenseRecord } from './billing-model';
import { requirePaymentProvider } from './billing-service';
import { decideLicense, type PaymentFact, type SubscriptionFacts } from './license-transitions';

/** A subscription as the payment provider has it; `facts` is null when its price is none of our plans. */
export interface ProviderSubscription {
  id: string;
  customerId: string;
  facts: SubscriptionFacts | null;
}

/** What a failed invoice tells the organization's admins. */
export interface FailedInvoice {
  amountDue: number;
  currency: string;
  url: string | null;
  nextAttemptAt: Date | null;
}

/**
 * A verified payment event (contract section 6), read from the provider's payload: only what the
 * rules need. Types billing does not act on are `other`.
 */
export type PaymentEvent = { id: string; created: Date } & (
  | { type: 'checkout.session.completed'; customerId: string; subscriptionId: string | null }
  | { type: 'invoice.payment_succeeded'; customerId: string; subscriptionId: string | null }
  | {
      type: 'invoice.payment_failed';
      customerId: string;
      subscriptionId: string | null;
      invoice: FailedInvoice;
    }
  | { type: 'customer.subscription.updated'; customerId: string; subscription: ProviderSubscription }
  | { type: 'customer.subscription.deleted'; customerId: string; subscriptionId: string }
  | { type: 'other'; providerType: string }
);

export type PaymentEventResult =
  | { outcome: 'applied'; orgId: string }
  | { outcome: 'duplicate'; orgId: string }
  | { outcome: 'ignored'; orgId: string | null; reason: string };

const ignored = (orgId: string | null, reason: string): PaymentEventResult => ({
  outcome: 'ignored',
  orgId,
  reason,
});

/**
 * Applies verified payment events to licenses (contract section 3; DESIGN section 3 "License"):
 * - the organization is the one whose customer the event names; an event of a customer that is none
 *   of ours, or whose subscription belongs to another customer, is ignored;
 * - facts the payload may hold stale (the subscription behind a checkout or an invoice) are fetched
 *   from the provider before the transaction: if it is unreachable, nothing is written and the
 *   error reaches the provider as a 5xx, so it sends the event again;
 * - one transaction records the event id in the ledger, locks the license, applies `decideLicense`
 *   and writes `billing.updated` (and `billing.payment_failed`) to the outbox: each event once, and
 *   concurrent deliveries of one event wait for each other on the ledger's key.
 */
export class PaymentEventHandler {
  constructor(
    private readonly store: BillingStore,
    /** Null when the deployment has no payment provider: every event is then refused with a 503. */
    private readonly provider: PaymentProvider | null,
    private readonly clock: Clock,
  ) {}

  async handle(payload: Uint8Array, signature: string): Promise<PaymentEventResult> {
    const provider = requirePaymentProvider(this.provider);
    const event = provider.verifyEvent(payload, signature);
    if (event.type === 'other') return ignored(null, `${event.providerType} is not an event billing acts on`);
    const account = await this.store.read((repos) => repos.findAccountByCustomer(event.customerId));
    if (!account) return ignored(null, `customer ${event.customerId} belongs to no organization`);
    const { orgId } = account;
    if (await this.store.read((repos) => repos.isPaymentEventRecorded(event.id)))
      return { outcome: 'duplicate', orgId };

    const fact = await this.factOf(provider, event, account.customerId);
    if ('ignore' in fact) return ignored(orgId, fact.ignore);

    return this.store.transaction(async (repos): Promise<PaymentEventResult> => {
      if (!(await repos.recordPaymentEventOnce(event.id, event.type))) return { outcome: 'duplicate', orgId };
      const license = await this.lockLicense(repos, orgId);
      const now = this.clock.now();
      const decision = decideLicense(license, fact, event.created, now);
      switch (decision.kind) {
        case 'change':
          await repos.saveLicense(decision.license);
          await repos.emit('billing.updated', billingUpdatedData(decision.license, decision.summary));
          return { outcome: 'applied', orgId };
        case 'notify-payment-failed': {
          if (event.type !== 'invoice.payment_failed') throw new Error(`${event.type} cannot fail a payment`);
          const { invoice } = event;
          const amount = formatMoney(invoice.amountDue, invoice.currency);
          await repos.emit(
            'billing.updated',
            billingUpdatedData(
              license,
              `Payment of ${amount}${license.plan === 'none' ? '' : ` for the ${PLAN_NAMES[license.plan]} subscription`} failed; update the payment method in the billing portal`,
            ),
          );
          await repos.emit('billing.payment_failed', {
            org_id: orgId,
            amount_due: invoice.amountDue,
            currency: invoice.currency,
            invoice_url: invoice.url,
            next_attempt_at: invoice.nextAttemptAt?.toISOString() ?? null,
            failed_at: event.created.toISOString(),
          });
          return { outcome: 'applied', orgId };
        }
        case 'ignore':
          // Recorded all the same: a replay is then a duplicate, not decided again.
          return ignored(orgId, decision.reason);
      }
    });
  }

  /** The facts the rules need; fetched from the provider where the payload may be stale. */
  private async factOf(
    provider: PaymentProvider,
    event: Exclude<PaymentEvent, { type: 'other' }>,
    customerId: string,
  ): Promise<PaymentFact | { ignore: string }> {
    switch (event.type) {
      case 'checkout.session.completed':
      case 'invoice.payment_succeeded': {
        if (!event.subscriptionId) return { ignore: `${event.type} without a subscription` };
        const subscription = await provider.retrieveSubscription(event.subscriptionId);
        if (!subscription) return { ignore: `subscription ${event.subscriptionId} does not exist` };
        if (subscription.customerId !== customerId) {
          return { ignore: `subscription ${subscription.id} belongs to another customer` };
        }
        if (!subscription.facts) return { ignore: `subscription ${subscription.id} has a price of no plan` };
        return { type: event.type, subscription: subscription.facts };
      }
      case 'invoice.payment_failed':
        return { type: event.type, subscriptionId: event.subscriptionId };
      case 'customer.subscription.updated':
        if (!event.subscription.facts) {
          return { ignore: `subscription ${event.subscription.id} has a price of no plan` };
        }
        return { type: event.type, subscription: event.subscription.facts };
      case 'customer.subscription.deleted':
        return { type: event.type, subscriptionId: event.subscriptionId };
    }
  }

  private async lockLicense(repos: BillingRepositories, orgId: string): Promise<LicenseRecord> {
    let license = await repos.findLicenseForUpdate(orgId);
    if (!license) {
      await repos.insertLicenseIfAbsent(initialLicense(orgId, this.clock.now()));
      license = await repos.findLicenseForUpdate(orgId);
    }
    if (!license) throw new Error(`license of organization ${orgId} vanished after insert`);
    return license;
  }
}
