import { describeEntitySchemaDrift } from '@sts/db/test/describe-entity-schema-drift';
import { BILLING_ENTITIES } from './billing-entities';
import { BILLING_MIGRATIONS, BILLING_SCHEMA } from './billing-migrations';

describeEntitySchemaDrift('billing', {
  schema: BILLING_SCHEMA,
  entities: BILLING_ENTITIES,
  migrations: BILLING_MIGRATIONS,
});
