import { describeEntitySchemaDrift } from '@sts/db/test/describe-entity-schema-drift';
import { NOTIFICATION_ENTITIES } from './notification-entities';
import { NOTIFICATION_MIGRATIONS, NOTIFICATION_SCHEMA } from './notification-migrations';

describeEntitySchemaDrift('notification', {
  schema: NOTIFICATION_SCHEMA,
  entities: NOTIFICATION_ENTITIES,
  migrations: NOTIFICATION_MIGRATIONS,
});
