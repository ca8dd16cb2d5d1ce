import type { EventData, EventType } from '@sts/events/event-catalogue';
import type { BillingCycle, LicenseRecord, Plan } from './billing-model';
import type { PaymentEvent, ProviderSubscription } from './payment-events';

/** The organization's customer at the payment provider: created at its first checkout, then reused. */
export interface BillingAccount {
  orgId: string;
  customerId: string;
  /** The organization's latest checkout session: closed before another one opens, so no one pays twice. */
  checkoutSessionId: string | null;
}

/** Repositories bound to one unit of work (a transaction or a plain read). */
export interface BillingRepositories {
  /**
   * Records an event id in the ledger of handled events; true the first time, false after. Call it in
   * the same transaction as the effect of the event, so the effect happens once.
   */
  recordEventOnce(eventId: string, eventType: string): Promise<boolean>;
  /** `recordEventOnce` for the payment provider's events (their own ledger: their ids are the provider's). */
  recordPaymentEventOnce(eventId: string, eventType: string): Promise<boolean>;
  /** Whether the payment ledger has the event (a cheap early answer to replays; the transaction decides). */
  isPaymentEventRecorded(eventId: string): Promise<boolean>;
  findLicense(orgId: string): Promise<LicenseRecord | null>;
  /** The license, locked until the transaction ends (changes to one license are serialized). */
  findLicenseForUpdate(orgId: string): Promise<LicenseRecord | null>;
  /** Inserts the license unless the organization already has one (which is then left unchanged). */
  insertLicenseIfAbsent(license: LicenseRecord): Promise<void>;
  saveLicense(license: LicenseRecord): Promise<void>;
  findAccount(orgId: string): Promise<BillingAccount | null>;
  findAccountByCustomer(customerId: string): Promise<BillingAccount | null>;
  /** Inserts the account unless the organization already has one (which is then left unchanged). */
  insertAccountIfAbsent(account: BillingAccount): Promise<void>;
  saveCheckoutSession(orgId: string, sessionId: string): Promise<void>;
  /** Writes an event to the outbox: published if and only if the transaction commits. */
  emit<Type extends EventType>(type: Type, data: EventData<Type>): Promise<void>;
}

export interface BillingStore {
  /** Runs work in one transaction. */
  transaction<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T>;
  /** Runs reads without a transaction. */
  read<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T>;
}

export interface Clock {
  now(): Date;
}

/**
 * The payment provider (Stripe). Failures to reach it are `PAYMENT_PROVIDER_UNAVAILABLE`; a missing
 * configuration is `BILLING_NOT_CONFIGURED`.
 */
export interface PaymentProvider {
  /**
   * Creates the organization's customer; the same organization asking twice (retries, concurrent first
   * checkouts) gets the same customer.
   */
  createCustomer(request: { orgId: string; email: string | null }): Promise<string>;
  /** The price of a plan and cycle (found by the lookup key `<plan>_<cycle>`). */
  priceOf(plan: Exclude<Plan, 'none'>, cycle: BillingCycle): Promise<string>;
  /** A new hosted checkout (subscription mode) for one price: its id and address. */
  createCheckoutSession(request: {
    orgId: string;
    customerId: string;
    priceId: string;
    successUrl: string;
    cancelUrl: string;
  }): Promise<{ id: string; url: string }>;
  /** Makes a checkout session unpayable; `paid` when it had been completed already (nothing to close). */
  closeCheckoutSession(sessionId: string): Promise<'closed' | 'paid'>;
  /** The address of a new customer portal session. */
  createPortalSession(request: { customerId: string; returnUrl: string }): Promise<string>;
  /** The subscription as the provider has it now; null when the provider has no such subscription. */
  retrieveSubscription(subscriptionId: string): Promise<ProviderSubscription | null>;
  /**
   * Verifies a webhook body against its signature header and reads it. Throws
   * `WEBHOOK_SIGNATURE_INVALID` for a missing, wrong or stale signature and `MALFORMED_REQUEST` for
   * a signed body that is not a well-formed event.
   */
  verifyEvent(payload: Uint8Array, signature: string): PaymentEvent;
}
