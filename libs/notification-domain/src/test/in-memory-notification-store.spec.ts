import { describeNotificationStoreContract } from './notification-store-contract';
import { InMemoryNotificationStore } from './in-memory-notification-store';

// The store the domain's unit tests run on, held to the contract the PostgreSQL store meets
// (postgres-notification-store.int-spec.ts in notification-infra).
describeNotificationStoreContract('in memory', async () => ({ store: new InMemoryNotificationStore() }));
