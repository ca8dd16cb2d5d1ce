import { openMigratedTestOrm } from '@sts/db/test/migrated-test-orm';
import { describeBillingStoreContract } from '@sts/billing-domain/test/billing-store-contract';
import { BILLING_ENTITIES } from './billing-entities';
import { BILLING_MIGRATIONS, BILLING_SCHEMA } from './billing-migrations';
import { PostgresBillingStore } from './postgres-billing-store';

// The store the service runs on, held to the contract the in-memory store of the domain's unit tests
// meets (in-memory-billing-store.spec.ts in billing-domain).
describeBillingStoreContract('PostgreSQL', async () => {
  const { orm, outboxEvents, close } = await openMigratedTestOrm({
    schema: BILLING_SCHEMA,
    entities: BILLING_ENTITIES,
    migrations: BILLING_MIGRATIONS,
  });
  return { store: new PostgresBillingStore(orm), outboxEvents, close };
});
