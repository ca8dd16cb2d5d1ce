import { describeBillingStoreContract } from './billing-store-contract';
import { InMemoryBillingStore } from './in-memory-billing-store';

// The store the domain's unit tests run on, held to the contract the PostgreSQL store meets
// (postgres-billing-store.int-spec.ts in billing-infra).
describeBillingStoreContract('in memory', async () => {
  const store = new InMemoryBillingStore();
  return {
    store,
    outboxEvents: async (orgId) =>
      store.state.emitted.filter((event) => (event.data as { org_id?: unknown }).org_id === orgId).length,
  };
});
