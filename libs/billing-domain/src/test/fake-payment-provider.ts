import { AppError } from '@sts/errors/app-error';
import type { BillingCycle, Plan } from '../billing-model';
import type { PaymentProvider } from '../billing-ports';
import type { PaymentEvent, ProviderSubscription } from '../payment-events';

/**
 * The payment provider port in memory, for the domain's unit tests (the Stripe adapter is tested
 * against the Stripe stand-in). Events are passed as JSON and "verified" when the signature is `ok`.
 */
export class FakePaymentProvider implements PaymentProvider {
  readonly customers = new Map<string, { orgId: string; email: string | null }>();
  readonly sessions = new Map<
    string,
    { customerId: string; priceId: string; status: 'open' | 'paid' | 'closed' }
  >();
  readonly subscriptions = new Map<string, ProviderSubscription>();
  /** Calls fail with PAYMENT_PROVIDER_UNAVAILABLE while true. */
  down = false;
  /** Runs inside createCheckoutSession, for races. */
  onCheckout: () => Promise<void> = async () => undefined;
  private sequence = 0;
  private readonly events = new Map<string, PaymentEvent>();

  private check(): void {
    if (this.down) throw new AppError('PAYMENT_PROVIDER_UNAVAILABLE');
  }

  createCustomer(request: { orgId: string; email: string | null }): Promise<string> {
    this.check();
    const existing = [...this.customers].find(([, customer]) => customer.orgId === request.orgId);
    if (existing) return Promise.resolve(existing[0]);
    const id = `cus_${++this.sequence}`;
    this.customers.set(id, { orgId: request.orgId, email: request.email });
    return Promise.resolve(id);
  }

  priceOf(plan: Exclude<Plan, 'none'>, cycle: BillingCycle): Promise<string> {
    this.check();
    return Promise.resolve(`price_${plan}_${cycle}`);
  }

  async createCheckoutSession(request: {
    customerId: string;
    priceId: string;
  }): Promise<{ id: string; url: string }> {
    this.check();
    await this.onCheckout();
    const id = `cs_${++this.sequence}`;
    this.sessions.set(id, { customerId: request.customerId, priceId: request.priceId, status: 'open' });
    return { id, url: `https://checkout.test/${id}` };
  }

  closeCheckoutSession(sessionId: string): Promise<'closed' | 'paid'> {
    this.check();
    const session = this.sessions.get(sessionId);
    if (session?.status === 'paid') return Promise.resolve('paid');
    if (session) session.status = 'closed';
    return Promise.resolve('closed');
  }

  createPortalSession(request: { customerId: string }): Promise<string> {
    this.check();
    return Promise.resolve(`https://portal.test/${request.customerId}`);
  }

  retrieveSubscription(subscriptionId: string): Promise<ProviderSubscription | null> {
    this.check();
    return Promise.resolve(structuredClone(this.subscriptions.get(subscriptionId) ?? null));
  }

  /** The body of a delivery of `event`: its id, which `verifyEvent` reads back. */
  payloadOf(event: PaymentEvent): Uint8Array {
    this.events.set(event.id, structuredClone(event));
    return Buffer.from(event.id);
  }

  verifyEvent(payload: Uint8Array, signature: string): PaymentEvent {
    if (signature !== 'ok') throw new AppError('WEBHOOK_SIGNATURE_INVALID');
    const event = this.events.get(Buffer.from(payload).toString('utf8'));
    if (!event) throw new AppError('MALFORMED_REQUEST');
    return structuredClone(event);
  }
}
