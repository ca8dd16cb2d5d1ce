import { useEffect, useState } from 'react';
import { useMutation } from '@tanstack/react-query';
import { useSearchParams } from 'react-router';
import { createCheckoutSession, createPortalSession } from '../api/billing';
import { useSessionQuery } from '../api/queries';
import type { BillingCycle, License, Plan } from '../api/types';
import { useApi } from '../auth/auth-context';
import { useCan, useSession } from '../auth/session-context';
import { Page } from '../components/page';
import { ProblemMessage, StatusMessage } from '../components/status';
import { Time } from '../components/time';

const PLANS: readonly { value: Exclude<Plan, 'none'>; label: string; description: string }[] = [
  { value: 'basic', label: 'Basic', description: 'Protection and the essential figures.' },
  { value: 'pro', label: 'Pro', description: 'Adds alert endpoints and longer analytics.' },
  { value: 'enterprise', label: 'Enterprise', description: 'For large fleets, with priority support.' },
];

const STATUS_TEXT: Record<License['status'], string> = {
  pending: 'Pending: no plan chosen yet',
  onboarding: 'Onboarding: waiting for the payment',
  active: 'Active',
  canceled: 'Canceled',
};

/** How long /billing?checkout=success waits for the payment to show in the license. */
const CHECKOUT_WAIT_MS = 30_000;

/** /billing: the license, and Stripe Checkout or the customer portal (ORG_ADMIN). */
export function BillingPage() {
  const can = useCan();
  const [params] = useSearchParams();
  const returned = params.get('checkout') === 'success';
  const [waitingUntil] = useState(() => (returned ? Date.now() + CHECKOUT_WAIT_MS : 0));
  const [waiting, setWaiting] = useState(returned);
  useEffect(() => {
    if (!waiting) return;
    const timer = setTimeout(() => setWaiting(false), Math.max(0, waitingUntil - Date.now()));
    return () => clearTimeout(timer);
  }, [waiting, waitingUntil]);
  // Back from Stripe Checkout: the webhook updates the license in a moment; look every 2 s for 30 s.
  useSessionQuery(waiting ? 2_000 : false);
  const { license } = useSession();
  useEffect(() => {
    if (waiting && license.status === 'active') setWaiting(false);
  }, [waiting, license.status]);

  return (
    <Page title="Billing">
      {returned && (
        <StatusMessage>
          <p>
            <strong>Payment received — your license updates in a moment.</strong>{' '}
            {waiting
              ? 'Checking…'
              : license.status === 'active'
                ? 'Your license is active.'
                : 'Reload later if it has not changed yet.'}
          </p>
        </StatusMessage>
      )}
      <LicenseCard license={license} />
      {can('billing.manage') ? (
        <>
          <Checkout license={license} />
          <Portal />
        </>
      ) : (
        <p className="message message-info">Only administrators change the plan or manage billing.</p>
      )}
    </Page>
  );
}

function LicenseCard({ license }: { license: License }) {
  return (
    <section aria-labelledby="license-heading" className="card">
      <h2 id="license-heading">License</h2>
      <dl className="details">
        <dt>Plan</dt>
        <dd>{license.plan === 'none' ? 'None' : PLANS.find((p) => p.value === license.plan)?.label}</dd>
        <dt>Status</dt>
        <dd>
          <span className={`tag tag-${license.status}`}>{STATUS_TEXT[license.status]}</span>
        </dd>
        <dt>Billing cycle</dt>
        <dd>{license.billing_cycle === 'annual' ? 'Annual' : 'Monthly'}</dd>
        <dt>{license.status === 'canceled' ? 'Ended' : 'Renews or expires'}</dt>
        <dd>
          <Time value={license.expires_at} />
        </dd>
      </dl>
    </section>
  );
}

function Checkout({ license }: { license: License }) {
  const api = useApi();
  const [plan, setPlan] = useState<Exclude<Plan, 'none'>>(license.plan === 'none' ? 'pro' : license.plan);
  const [cycle, setCycle] = useState<BillingCycle>(license.billing_cycle);
  const checkout = useMutation({
    mutationFn: () => createCheckoutSession(api, { plan, cycle }),
    onSuccess: (url) => window.location.assign(url),
  });
  const paying = license.status === 'active';
  return (
    <section aria-labelledby="checkout-heading" className="card">
      <h2 id="checkout-heading">Choose a plan</h2>
      {paying && <p>Your subscription is active: change the plan or cycle through Manage billing.</p>}
      <form
        onSubmit={(event) => {
          event.preventDefault();
          checkout.mutate();
        }}
      >
        <fieldset className="plans">
          <legend>Plan</legend>
          {PLANS.map((item) => (
            <div key={item.value} className="plan">
              <input
                id={`plan-${item.value}`}
                type="radio"
                name="plan"
                value={item.value}
                checked={plan === item.value}
                aria-describedby={`plan-${item.value}-description`}
                onChange={() => setPlan(item.value)}
              />
              <label htmlFor={`plan-${item.value}`}>{item.label}</label>
              <span id={`plan-${item.value}-description`} className="muted">
                — {item.description}
              </span>
            </div>
          ))}
        </fieldset>
        <fieldset className="segmented">
          <legend>Billing cycle</legend>
          <label>
            <input
              type="radio"
              name="cycle"
              value="monthly"
              checked={cycle === 'monthly'}
              onChange={() => setCycle('monthly')}
            />
            <span>Monthly</span>
          </label>
          <label>
            <input
              type="radio"
              name="cycle"
              value="annual"
              checked={cycle === 'annual'}
              onChange={() => setCycle('annual')}
            />
            <span>Annual</span>
          </label>
        </fieldset>
        <button type="submit" disabled={checkout.isPending || checkout.isSuccess}>
          {checkout.isPending || checkout.isSuccess ? 'Opening checkout…' : 'Continue to checkout'}
        </button>
      </form>
      <ProblemMessage error={checkout.error} />
    </section>
  );
}

function Portal() {
  const api = useApi();
  const portal = useMutation({
    mutationFn: () => createPortalSession(api),
    onSuccess: (url) => window.location.assign(url),
  });
  return (
    <section aria-labelledby="portal-heading" className="card">
      <h2 id="portal-heading">Subscription, payment methods and invoices</h2>
      <p>Stripe&apos;s customer portal changes the plan, the payment method, and shows the invoices.</p>
      <button
        type="button"
        className="button-secondary"
        onClick={() => portal.mutate()}
        disabled={portal.isPending}
      >
        Manage billing
      </button>
      <ProblemMessage error={portal.error} />
    </section>
  );
}
