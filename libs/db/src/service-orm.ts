import { MikroORM, type EntitySchema, type LoggerNamespace } from '@mikro-orm/postgresql';
import { Migrator, type Migration } from '@mikro-orm/migrations';
import { Client } from 'pg';
import type { Logger } from '@sts/logger/create-logger';

export type ServiceOrm = MikroORM;

export interface MigrationEntry {
  /** Sortable and never renamed once shipped, e.g. `0001_initial`. */
  name: string;
  class: new (...args: ConstructorParameters<typeof Migration>) => Migration;
}

export interface ServiceOrmOptions {
  databaseUrl: string;
  /** The PostgreSQL schema this service owns; no other service touches it. */
  schema: string;
  entities: EntitySchema[];
  migrations: MigrationEntry[];
  logger: Logger;
  poolMax?: number;
}

/**
 * One MikroORM instance per service, bound to the service's own schema. Migrations are listed
 * explicitly (no file-system discovery), so the same code runs from sources and from bundles.
 */
export async function createServiceOrm(options: ServiceOrmOptions): Promise<ServiceOrm> {
  const debug: LoggerNamespace[] = options.logger.isLevelEnabled('trace') ? ['query'] : [];
  return MikroORM.init({
    clientUrl: options.databaseUrl,
    schema: options.schema,
    entities: options.entities,
    extensions: [Migrator],
    discovery: { warnWhenNoEntities: false },
    // Every unit of work gets its own forked EntityManager; the global one is a bug waiting to happen.
    allowGlobalContext: false,
    // Stores never persist or flush entities (unit-of-work.ts): every read returns what the database holds
    // now, and reads cost no identity-map bookkeeping. Decided here once for every EntityManager.
    disableIdentityMap: true,
    debug,
    logger: (message) => options.logger.trace(message),
    // Connections, once opened, stay open (min = max). With tarn's defaults (min 0, 30 s idle timeout,
    // most recently released connection reused first) a steady light load keeps two connections busy
    // and closes the rest; the next burst then waits for new backends to start: measured as clusters of
    // 50–80 ms device pages with no GC pause anywhere (docs/benchmarks.md).
    pool: { min: options.poolMax ?? 10, max: options.poolMax ?? 10 },
    migrations: {
      tableName: 'schema_migrations',
      migrationsList: options.migrations,
      transactional: true,
      allOrNothing: true,
      snapshot: false,
    },
  });
}

/**
 * Applies pending migrations of the service's schema; safe to run on every start and from several
 * processes at once: a session-level advisory lock per schema, held on a connection of its own, lets
 * one process migrate while the others wait and then find nothing to do.
 */
export async function migrateToLatest(orm: ServiceOrm, logger: Logger): Promise<void> {
  const lock = new Client({ connectionString: orm.config.get('clientUrl') });
  await lock.connect();
  try {
    await lock.query('select pg_advisory_lock(hashtext($1))', [`sts-migrations:${orm.config.get('schema')}`]);
    const applied = await orm.getMigrator().up();
    if (applied.length > 0) logger.info({ migrations: applied.map((m) => m.name) }, 'migrations applied');
  } finally {
    // Closing the session releases the lock.
    await lock.end();
  }
}

/** Fails unless the schema is at the latest migration (MIGRATIONS=check: a release's job migrates). */
export async function assertMigrated(orm: ServiceOrm): Promise<void> {
  const pending = await orm.getMigrator().getPendingMigrations();
  if (pending.length > 0) {
    throw new Error(
      `schema ${orm.config.get('schema')} has ${pending.length} pending migration(s) (${pending.map((m) => m.name).join(', ')}): ` +
        "run this release's migrations first (MIGRATIONS=only, the migrate job)",
    );
  }
}
