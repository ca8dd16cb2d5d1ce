import { openMigratedTestOrm } from '@sts/db/test/migrated-test-orm';
import { describeNotificationStoreContract } from '@sts/notification-domain/test/notification-store-contract';
import { NOTIFICATION_ENTITIES } from './notification-entities';
import { NOTIFICATION_MIGRATIONS, NOTIFICATION_SCHEMA } from './notification-migrations';
import { PostgresNotificationStore } from './postgres-notification-store';

// The store the service runs on, held to the contract the in-memory store of the domain's unit tests
// meets (in-memory-notification-store.spec.ts in notification-domain).
describeNotificationStoreContract('PostgreSQL', async () => {
  const { orm, close } = await openMigratedTestOrm({
    schema: NOTIFICATION_SCHEMA,
    entities: NOTIFICATION_ENTITIES,
    migrations: NOTIFICATION_MIGRATIONS,
  });
  return { store: new PostgresNotificationStore(orm), close };
});
