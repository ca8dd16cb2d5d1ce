import { describeEntitySchemaDrift } from '@sts/db/test/describe-entity-schema-drift';
import { IDENTITY_ENTITIES } from './identity-entities';
import { IDENTITY_MIGRATIONS, IDENTITY_SCHEMA } from './identity-migrations';

describeEntitySchemaDrift('identity', {
  schema: IDENTITY_SCHEMA,
  entities: IDENTITY_ENTITIES,
  migrations: IDENTITY_MIGRATIONS,
});
