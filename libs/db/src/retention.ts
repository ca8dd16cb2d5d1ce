import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from '@sts/logger/create-logger';
import { sqlRunner } from './sql-runner';

const HOUR_MS = 60 * 60 * 1000;
/** Rows deleted per statement, so pruning never holds many row locks or one long transaction. */
const DELETE_BATCH = 5_000;

/** A table of the service's schema whose rows expire `retentionMs` after the time in `timeColumn`. */
export interface RetainedTable {
  table: string;
  key: string;
  /** Rows where it is null never expire. */
  timeColumn: string;
  retentionMs: number;
}

/** Deletes the table's expired rows, in batches; returns how many. */
export async function deleteExpiredRows(
  em: EntityManager,
  { table, key, timeColumn, retentionMs }: RetainedTable,
): Promise<number> {
  const qualified = `"${em.config.get('schema')}"."${table}"`;
  const sql = sqlRunner(em);
  let total = 0;
  for (;;) {
    // Raw: one statement for any service's table, named by the host (`RetainedTable`), in batches
    // (PostgreSQL has no `delete … limit`), timed by the database's clock.
    const deleted = await sql.run(
      `delete from ${qualified} where "${key}" in (
         select "${key}" from ${qualified} where "${timeColumn}" < now() - make_interval(secs => ?) limit ${DELETE_BATCH}
       )`,
      [retentionMs / 1000],
    );
    total += deleted;
    if (deleted < DELETE_BATCH) return total;
  }
}

/**
 * Deletes the tables' expired rows now and then hourly, so they hold what is still needed instead of
 * growing forever. `stop()` waits for a pass in progress.
 */
export function startRetention(
  orm: MikroORM,
  logger: Logger,
  tables: readonly RetainedTable[],
  intervalMs = HOUR_MS,
): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const pass = () => {
    running ??= (async () => {
      for (const table of tables) {
        try {
          const deleted = await deleteExpiredRows(orm.em.fork(), table);
          if (deleted > 0) logger.info({ table: table.table, deleted }, 'expired rows deleted');
        } catch (error) {
          logger.warn({ err: error, table: table.table }, 'deleting expired rows failed; will retry');
        }
      }
    })().finally(() => {
      running = undefined;
    });
  };
  pass();
  const timer = setInterval(pass, intervalMs);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
