import type { Logger } from '@sts/logger/create-logger';
import {
  createClickHouseClient,
  type ClickHouseClient,
  type ClickHouseClientOptions,
} from './clickhouse-client';
import { SqlFragment, identifier, sql } from './sql-escape';

/**
 * One schema change: statements run in order, each a single SQL statement (the HTTP interface runs one
 * statement per request). Unqualified table names refer to the migrated database.
 *
 * ClickHouse has no transactions, and 18.16 has no `ADD COLUMN IF NOT EXISTS` / `DROP COLUMN IF EXISTS`,
 * so progress is recorded after every statement: a migration that fails halfway resumes at the statement
 * that failed. Never edit a migration that has run anywhere; add a new one.
 */
export interface ClickHouseMigration {
  readonly id: string;
  readonly statements: readonly (string | SqlFragment)[];
}

export interface ClickHouseMigrationOptions {
  /** Where the server is; a database in the URL or in `database` here is ignored. */
  connection: Omit<ClickHouseClientOptions, 'database'>;
  /** Created if missing. */
  database: string;
  /** In the order they must be applied. */
  migrations: readonly ClickHouseMigration[];
  /**
   * A cluster of the servers' `remote_servers` (CLICKHOUSE_CLUSTER): the database and the migration ledger
   * are created `ON CLUSTER`, the ledger replicated to every server, so that a release's migrations are
   * recorded once for the whole cluster. The migrations' own statements say `ON CLUSTER` themselves.
   */
  cluster?: string | null;
  logger?: Logger;
}

export interface ClickHouseMigrationResult {
  /** Ids applied by this run, in order. */
  applied: string[];
  /** Ids that were already recorded. */
  skipped: string[];
}

export const MIGRATIONS_TABLE = 'schema_migrations';

/**
 * `ON CLUSTER` answers with one row per server as each finishes: without waiting for the end of the
 * query, an error on the third server would arrive after a 200 status and pass for success.
 */
const DDL_SETTINGS = { wait_end_of_query: 1 } as const;

const MIGRATION_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/**
 * Creates the database and its `schema_migrations` table if missing, then applies, in the given order,
 * the migrations not yet recorded there. DDL is plain enough for ClickHouse 18.16 and current versions.
 *
 * ClickHouse has no locks: every statement must be idempotent (`IF NOT EXISTS`), so that two processes
 * migrating at once (two replicas starting together) only repeat each other's work.
 */
export async function runClickHouseMigrations(
  options: ClickHouseMigrationOptions,
): Promise<ClickHouseMigrationResult> {
  const { database, migrations, logger } = options;
  const db = identifier(database);
  checkMigrations(migrations);

  const cluster = options.cluster ?? null;
  const onCluster = cluster === null ? sql`` : sql`ON CLUSTER ${identifier(cluster)}`;

  // The database may not exist yet, so this client works in `default`.
  const admin = createClickHouseClient({ ...options.connection, database: 'default' });
  try {
    await admin.command({
      query: sql`CREATE DATABASE IF NOT EXISTS ${db} ${onCluster}`.text,
      clickhouse_settings: DDL_SETTINGS,
    });
  } finally {
    await admin.close();
  }

  const client = createClickHouseClient({ ...options.connection, database });
  try {
    // On a cluster, one ledger for all servers: replicated to each of them (the replica name has the shard
    // in it, since replica macros need only be unique within a shard).
    const engine =
      cluster === null
        ? sql`MergeTree()`
        : sql`ReplicatedMergeTree(${`/clickhouse/${cluster}/tables/all/${database}/${MIGRATIONS_TABLE}`}, '{shard}-{replica}')`;
    await client.command({
      query: sql`CREATE TABLE IF NOT EXISTS ${identifier(database, MIGRATIONS_TABLE)} ${onCluster} (
        id String,
        statement UInt32,
        applied_at DateTime DEFAULT now()
      ) ENGINE = ${engine} ORDER BY id`.text,
      clickhouse_settings: DDL_SETTINGS,
    });
    const progress = await migrationProgress(client);
    const result: ClickHouseMigrationResult = { applied: [], skipped: [] };
    for (const migration of migrations) {
      const done = progress.get(migration.id) ?? 0;
      if (done >= migration.statements.length) {
        result.skipped.push(migration.id);
        continue;
      }
      for (let index = done; index < migration.statements.length; index++) {
        const statement = migration.statements[index]!;
        try {
          await client.command({
            query: statement instanceof SqlFragment ? statement.text : statement,
            clickhouse_settings: DDL_SETTINGS,
          });
        } catch (error) {
          throw new Error(
            `ClickHouse migration ${migration.id} failed at statement ${index + 1} of ${migration.statements.length} in database ${database}: ${(error as Error).message}`,
            { cause: error },
          );
        }
        await client.command({
          query:
            sql`INSERT INTO ${identifier(MIGRATIONS_TABLE)} (id, statement) VALUES (${migration.id}, ${index + 1})`
              .text,
        });
      }
      result.applied.push(migration.id);
      logger?.info({ database, migration: migration.id }, 'applied ClickHouse migration');
    }
    return result;
  } finally {
    await client.close();
  }
}

/**
 * Fails unless every migration ran to its last statement (MIGRATIONS=check: a release's job migrates).
 * A database or ledger that does not exist yet counts as nothing applied.
 */
export async function assertClickHouseMigrated(options: ClickHouseMigrationOptions): Promise<void> {
  checkMigrations(options.migrations);
  const client = createClickHouseClient({ ...options.connection, database: options.database });
  let progress: Map<string, number>;
  try {
    // A database or ledger not created yet is nothing applied; ClickHouse out of reach is an error of its own.
    progress = await migrationProgress(client).catch((error: unknown) => {
      if (/UNKNOWN_(TABLE|DATABASE)|does(n't| not) exist/i.test(String((error as Error)?.message ?? error))) {
        return new Map<string, number>();
      }
      throw error;
    });
  } finally {
    await client.close();
  }
  const pending = options.migrations.filter(
    (migration) => (progress.get(migration.id) ?? 0) < migration.statements.length,
  );
  if (pending.length > 0) {
    throw new Error(
      `ClickHouse database ${options.database} has ${pending.length} pending migration(s) (${pending.map((m) => m.id).join(', ')}): ` +
        "run this release's migrations first (MIGRATIONS=only, the migrate job)",
    );
  }
}

/** For each migration recorded in `schema_migrations` of the client's database, how many statements ran. */
export async function migrationProgress(client: ClickHouseClient): Promise<Map<string, number>> {
  const result = await client.query({
    query: sql`SELECT id, max(statement) AS done FROM ${identifier(MIGRATIONS_TABLE)} GROUP BY id`.text,
    format: 'JSONEachRow',
  });
  const rows = await result.json<{ id: string; done: number | string }>();
  return new Map(rows.map((row) => [row.id, Number(row.done)]));
}

function checkMigrations(migrations: readonly ClickHouseMigration[]): void {
  const seen = new Set<string>();
  for (const migration of migrations) {
    if (!MIGRATION_ID.test(migration.id)) {
      throw new TypeError(
        `ClickHouse migration id ${JSON.stringify(migration.id)} must match ${String(MIGRATION_ID)}`,
      );
    }
    if (seen.has(migration.id)) throw new TypeError(`ClickHouse migration id ${migration.id} appears twice`);
    seen.add(migration.id);
    if (migration.statements.length === 0)
      throw new TypeError(`ClickHouse migration ${migration.id} has no statements`);
    for (const statement of migration.statements) {
      const text = statement instanceof SqlFragment ? statement.text : statement;
      if (typeof text !== 'string' || text.trim() === '') {
        throw new TypeError(`ClickHouse migration ${migration.id} has an empty statement`);
      }
    }
  }
}
