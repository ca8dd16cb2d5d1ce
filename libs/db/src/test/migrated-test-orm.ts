import { createLogger } from '@sts/logger/create-logger';
import { createTestDatabase } from '@sts/testing/postgres';
import { createServiceOrm, migrateToLatest, type ServiceOrm, type ServiceOrmOptions } from '../service-orm';

export interface MigratedTestOrm {
  orm: ServiceOrm;
  /** Events the service's outbox holds for an organization (written by the store's transactions). */
  outboxEvents(orgId: string): Promise<number>;
  /** Closes the ORM and drops the database. */
  close(): Promise<void>;
}

/**
 * A service's ORM on a database of its own, migrated as the service migrates at start: what a store's
 * integration spec runs on (the store contract suites' PostgreSQL side).
 */
export async function openMigratedTestOrm(
  options: Pick<ServiceOrmOptions, 'schema' | 'entities' | 'migrations'>,
): Promise<MigratedTestOrm> {
  const logger = createLogger(`${options.schema}-store-int`, 'silent');
  const database = await createTestDatabase(`${options.schema}store`);
  const orm = await createServiceOrm({ ...options, databaseUrl: database.url, logger });
  await migrateToLatest(orm, logger);
  return {
    orm,
    outboxEvents: async (orgId) => {
      const [row] = await orm.em
        .getConnection()
        .execute<{ n: string }[]>(
          `select count(*) as n from "${options.schema}".outbox where envelope->'data'->>'org_id' = ?`,
          [orgId],
        );
      return Number(row?.n ?? 0);
    },
    close: async () => {
      await orm.close();
      await database.drop();
    },
  };
}
