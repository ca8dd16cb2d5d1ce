import type { ApiFetch } from './api-fetch';
import type { BillingCycle, Plan } from './types';

export async function createCheckoutSession(
  api: ApiFetch,
  choice: { plan: Exclude<Plan, 'none'>; cycle: BillingCycle },
): Promise<string> {
  return (await api<{ url: string }>('/api/billing/checkout-session', { method: 'POST', body: choice })).data
    .url;
}

export async function createPortalSession(api: ApiFetch): Promise<string> {
  return (await api<{ url: string }>('/api/billing/portal', { method: 'POST' })).data.url;
}
