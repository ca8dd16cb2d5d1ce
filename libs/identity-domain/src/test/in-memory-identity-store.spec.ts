import { describeIdentityStoreContract } from './identity-store-contract';
import { InMemoryIdentityStore } from './in-memory-identity-store';

// The store the domain's unit tests run on, held to the contract the PostgreSQL store meets
// (postgres-identity-store.int-spec.ts in identity-infra).
describeIdentityStoreContract('in memory', async () => {
  const store = new InMemoryIdentityStore();
  return {
    store,
    outboxEvents: async (orgId) =>
      store.state.events.filter((event) => (event.data as { org_id?: unknown }).org_id === orgId).length,
  };
});
