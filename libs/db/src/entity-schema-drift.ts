import type { EntitySchema } from '@mikro-orm/postgresql';
import type { Logger } from '@sts/logger/create-logger';
import { createServiceOrm, migrateToLatest, type MigrationEntry } from './service-orm';

/** A difference the entities cannot describe in MikroORM 6, and why it may stay. */
export interface IgnoredDrift {
  /** Matches one statement of the schema generator's update SQL. */
  statement: RegExp;
  why: string;
}

export interface EntitySchemaDriftOptions {
  /** An empty database: the service's migrations are applied to it. */
  databaseUrl: string;
  schema: string;
  entities: EntitySchema[];
  migrations: MigrationEntry[];
  logger: Logger;
  /** Keep it short, with a reason each: everything else the entities must describe. */
  ignore?: readonly IgnoredDrift[];
}

/**
 * Where a service's entities and the schema its migrations leave disagree; empty when they agree.
 * Migrates the (empty) database with the service's migrations, then lists
 * - the statements of MikroORM's schema generator diff (`getUpdateSchemaSQL`, scoped to the schema) that
 *   would make the database match the entities: tables, columns (type, nullability, default, generated
 *   expression), primary keys, unique constraints, indexes, checks and foreign keys; minus `ignore`;
 * - the indexes the entities declare with an `expression` (partial, expression and operator-class
 *   indexes) whose expression differs from what PostgreSQL prints for the index (`pg_get_indexdef`): the
 *   generator compares those by name only, so entities write them in PostgreSQL's own form and they are
 *   compared here, exactly.
 * Neither compares table storage parameters (`fillfactor`), functions or extensions: the entity files
 * name the ones their schema has.
 */
export async function entitySchemaDrift(options: EntitySchemaDriftOptions): Promise<string[]> {
  const orm = await createServiceOrm({
    databaseUrl: options.databaseUrl,
    schema: options.schema,
    entities: options.entities,
    migrations: options.migrations,
    logger: options.logger,
    poolMax: 1,
  });
  try {
    await migrateToLatest(orm, options.logger);
    const generator = orm.getSchemaGenerator();
    const update = await generator.getUpdateSchemaSQL({ wrap: false, safe: false, schema: options.schema });
    const drift = update
      .split(/;\s*\n/)
      .map((statement) => statement.trim().replace(/;$/, ''))
      .filter((statement) => statement !== '')
      .filter((statement) => !(options.ignore ?? []).some((ignored) => ignored.statement.test(statement)));

    const printed = new Map(
      (
        await orm.em
          .fork()
          .getConnection()
          .execute<{ indexname: string; indexdef: string }[]>(
            'select indexname, indexdef from pg_indexes where schemaname = ?',
            [options.schema],
          )
      ).map((row) => [row.indexname, row.indexdef]),
    );
    for (const table of generator.getTargetSchema(options.schema).getTables()) {
      for (const index of table.getIndexes()) {
        if (typeof index.expression !== 'string') continue;
        const actual = printed.get(index.keyName);
        if (actual !== index.expression) {
          drift.push(
            `index ${index.keyName} of ${table.name}: the entity says ${index.expression}; the database ${actual ?? 'has no such index'}`,
          );
        }
      }
    }
    return drift;
  } finally {
    await orm.close(true);
  }
}
