import { Metadata } from '@grpc/grpc-js';
import { BillingService } from '@sts/billing-domain/billing-service';
import { PaymentEventHandler } from '@sts/billing-domain/payment-events';
import { FakePaymentProvider } from '@sts/billing-domain/test/fake-payment-provider';
import { InMemoryBillingStore, ManualClock } from '@sts/billing-domain/test/in-memory-billing-store';
import { createLogger } from '@sts/logger/create-logger';
import { BillingCycle, LicenseStatus, Plan } from '@sts/proto/gen/billing/v1/billing';
import { billingGrpcHandlers } from './billing-grpc-handlers';

/** The billing handlers over the domain service, the in-memory store and the fake provider. */
function handlersOver(store: InMemoryBillingStore, provider: FakePaymentProvider) {
  const clock = new ManualClock();
  const service = new BillingService(store, clock, provider, { publicAppUrl: 'https://app.test' });
  return billingGrpcHandlers(
    service,
    new PaymentEventHandler(store, provider, clock),
    createLogger('billing-handlers-spec', 'silent'),
  );
}

const context = { metadata: new Metadata(), requestId: 'test' };

describe('billing gRPC handlers', () => {
  let store: InMemoryBillingStore;
  let provider: FakePaymentProvider;
  let handlers: ReturnType<typeof handlersOver>;

  beforeEach(() => {
    store = new InMemoryBillingStore();
    provider = new FakePaymentProvider();
    handlers = handlersOver(store, provider);
  });

  it('answers with the license in billing.v1 words', async () => {
    const { license } = await handlers.getLicense({ orgId: 'o1' }, context);
    expect(license).toMatchObject({
      orgId: 'o1',
      plan: Plan.PLAN_NONE,
      status: LicenseStatus.LICENSE_STATUS_PENDING,
      billingCycle: BillingCycle.BILLING_CYCLE_MONTHLY,
    });
  });

  // The domain trusts the organization id it is given: the handlers are the one place that checks it.
  it('requires an organization id before the domain sees the request', async () => {
    const missing = { code: 'VALIDATION_FAILED', fields: [{ path: 'org_id', message: 'is required' }] };
    await expect(handlers.getLicense({ orgId: ' ' }, context)).rejects.toMatchObject(missing);
    await expect(handlers.createPortalSession({ orgId: '' }, context)).rejects.toMatchObject(missing);
    expect(store.state.licenses.size).toBe(0);
  });

  it('starts a checkout of a purchasable plan and a cycle', async () => {
    const { url } = await handlers.createCheckoutSession(
      {
        orgId: 'o1',
        plan: Plan.PLAN_PRO,
        billingCycle: BillingCycle.BILLING_CYCLE_ANNUAL,
        requestedByEmail: ' admin@o1.test ',
      },
      context,
    );
    expect(url).toMatch(/^https:\/\/checkout\.test\//);
    expect([...provider.sessions.values()].map((session) => session.priceId)).toEqual(['price_pro_annual']);
    expect([...provider.customers.values()]).toEqual([{ orgId: 'o1', email: 'admin@o1.test' }]);
  });

  it.each([
    [Plan.PLAN_NONE, BillingCycle.BILLING_CYCLE_MONTHLY, 'plan', 'must be basic, pro or enterprise'],
    [Plan.PLAN_UNSPECIFIED, BillingCycle.BILLING_CYCLE_MONTHLY, 'plan', 'must be basic, pro or enterprise'],
    [Plan.PLAN_BASIC, BillingCycle.BILLING_CYCLE_UNSPECIFIED, 'cycle', 'must be monthly or annual'],
    [Plan.PLAN_BASIC, BillingCycle.UNRECOGNIZED, 'cycle', 'must be monthly or annual'],
  ])('refuses a checkout of %s, %s (%s)', async (plan, billingCycle, path, message) => {
    await expect(
      handlers.createCheckoutSession({ orgId: 'o1', plan, billingCycle, requestedByEmail: '' }, context),
    ).rejects.toMatchObject({ code: 'VALIDATION_FAILED', fields: [{ path, message }] });
    expect(provider.sessions.size).toBe(0);
  });
});
