import { describeEntitySchemaDrift } from '@sts/db/test/describe-entity-schema-drift';
import { ENROLLMENT_ENTITIES } from './enrollment-entities';
import { ENROLLMENT_MIGRATIONS, ENROLLMENT_SCHEMA } from './enrollment-migrations';

describeEntitySchemaDrift('enrollment', {
  schema: ENROLLMENT_SCHEMA,
  entities: ENROLLMENT_ENTITIES,
  migrations: ENROLLMENT_MIGRATIONS,
});
