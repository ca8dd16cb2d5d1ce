import { openMigratedTestOrm } from '@sts/db/test/migrated-test-orm';
import { describeIdentityStoreContract } from '@sts/identity-domain/test/identity-store-contract';
import { IDENTITY_ENTITIES } from './identity-entities';
import { IDENTITY_MIGRATIONS, IDENTITY_SCHEMA } from './identity-migrations';
import { PostgresIdentityStore } from './postgres-identity-store';

// The store the service runs on, held to the contract the in-memory store of the domain's unit tests
// meets (in-memory-identity-store.spec.ts in identity-domain).
describeIdentityStoreContract('PostgreSQL', async () => {
  const { orm, outboxEvents, close } = await openMigratedTestOrm({
    schema: IDENTITY_SCHEMA,
    entities: IDENTITY_ENTITIES,
    migrations: IDENTITY_MIGRATIONS,
  });
  return { store: new PostgresIdentityStore(orm), outboxEvents, close };
});
