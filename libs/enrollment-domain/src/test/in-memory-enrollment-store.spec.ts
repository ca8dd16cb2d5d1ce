import { describeEnrollmentStoreContract } from './enrollment-store-contract';
import { InMemoryEnrollmentStore } from './in-memory-enrollment-store';

// The store the domain's unit tests run on, held to the contract the PostgreSQL store meets
// (postgres-enrollment-store.int-spec.ts in enrollment-infra).
describeEnrollmentStoreContract('in memory', async () => {
  const store = new InMemoryEnrollmentStore();
  return {
    store,
    outboxEvents: async (orgId) =>
      store.state.events.filter((event) => (event.data as { org_id?: unknown }).org_id === orgId).length,
  };
});
