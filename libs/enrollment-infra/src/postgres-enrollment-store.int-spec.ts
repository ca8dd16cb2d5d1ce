import { openMigratedTestOrm } from '@sts/db/test/migrated-test-orm';
import { describeEnrollmentStoreContract } from '@sts/enrollment-domain/test/enrollment-store-contract';
import { ENROLLMENT_ENTITIES } from './enrollment-entities';
import { ENROLLMENT_MIGRATIONS, ENROLLMENT_SCHEMA } from './enrollment-migrations';
import { PostgresEnrollmentStore } from './postgres-enrollment-store';

// The store the service runs on, held to the contract the in-memory store of the domain's unit tests
// meets (in-memory-enrollment-store.spec.ts in enrollment-domain).
describeEnrollmentStoreContract('PostgreSQL', async () => {
  const { orm, outboxEvents, close } = await openMigratedTestOrm({
    schema: ENROLLMENT_SCHEMA,
    entities: ENROLLMENT_ENTITIES,
    migrations: ENROLLMENT_MIGRATIONS,
  });
  return { store: new PostgresEnrollmentStore(orm), outboxEvents, close };
});
