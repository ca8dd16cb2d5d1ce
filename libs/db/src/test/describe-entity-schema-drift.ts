import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { entitySchemaDrift, type EntitySchemaDriftOptions } from '../entity-schema-drift';
import { createLogger } from '@sts/logger/create-logger';

/**
 * The drift spec every service's entities get: on a fresh database migrated with the service's migrations,
 * MikroORM's schema generator finds nothing to change, so the entities describe exactly the migrated schema.
 *
 *   describeEntitySchemaDrift('billing', { schema: BILLING_SCHEMA, entities: BILLING_ENTITIES, migrations: BILLING_MIGRATIONS });
 */
export function describeEntitySchemaDrift(
  service: string,
  options: Omit<EntitySchemaDriftOptions, 'databaseUrl' | 'logger'>,
): void {
  describe(`${service} entities (PostgreSQL)`, () => {
    let database: TestDatabase;

    beforeAll(async () => {
      database = await createTestDatabase(`${service}entities`);
    });

    afterAll(async () => {
      await database.drop();
    });

    it('describe exactly the schema the migrations leave', async () => {
      expect(
        await entitySchemaDrift({
          ...options,
          databaseUrl: database.url,
          logger: createLogger(`${service}-entities`, 'silent'),
        }),
      ).toEqual([]);
    });
  });
}
