import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from '@sts/logger/create-logger';

const HOUR_MS = 60 * 60 * 1000;
/**
 * How long a handled event's id is kept. An event can be redelivered only while the stream holds it
 * (its max_age, 7 days, counted from publication, which precedes handling); a day more for clocks.
 */
export const PROCESSED_EVENTS_RETENTION_MS = 8 * 24 * HOUR_MS;
/** Rows deleted per statement, so pruning never holds many row locks or one long transaction. */
const PRUNE_BATCH = 5_000;

/**
 * DDL of the per-service ledger of handled events. Include it in the service's first migration.
 * Consumers record the event id in the same transaction as the effect, so a redelivered event
 * is recognised and skipped (JetStream delivers at least once).
 */
export function processedEventsTableSql(schema: string): string {
  return `create table if not exists "${schema}"."processed_events" (
    "event_id" uuid not null primary key,
    "event_type" text not null,
    "processed_at" timestamptz not null default now()
  );`;
}

/** Returns true the first time an event id is seen (the caller then applies the effect), false after. */
export async function recordEventOnce(em: EntityManager, eventId: string, eventType: string): Promise<boolean> {
  const schema = em.config.get('schema');
  const rows: unknown[] = await em
    .getConnection()
    .execute(
      `insert into "${schema}"."processed_events" (event_id, event_type) values (?, ?) on conflict do nothing returning event_id`,
      [eventId, eventType],
      'all',
      em.getTransactionContext(),
    );
  return rows.length === 1;
}

/** Deletes ids of events handled longer ago than the retention, in batches; returns how many. */
export async function pruneProcessedEvents(em: EntityManager, retentionMs = PROCESSED_EVENTS_RETENTION_MS): Promise<number> {
  const schema = em.config.get('schema');
  let total = 0;
  for (;;) {
    const deleted: unknown[] = await em.getConnection().execute(
      `delete from "${schema}"."processed_events" where event_id in (
         select event_id from "${schema}"."processed_events"
         where processed_at < now() - make_interval(secs => ?)
         limit ${PRUNE_BATCH}
       ) returning event_id`,
      [retentionMs / 1000],
      'all',
    );
    total += deleted.length;
    if (deleted.length < PRUNE_BATCH) return total;
  }
}

/**
 * Prunes the ledger now and then hourly, so it holds about the stream's retention instead of every
 * event ever handled. `stop()` waits for a pass in progress.
 */
export function startProcessedEventsPruning(
  orm: MikroORM,
  logger: Logger,
  options: { retentionMs?: number; intervalMs?: number } = {},
): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const pass = () => {
    if (running) return;
    running = pruneProcessedEvents(orm.em.fork(), options.retentionMs)
      .then((pruned) => {
        if (pruned > 0) logger.info({ pruned }, 'processed events past retention deleted');
      })
      .catch((error: unknown) => logger.warn({ err: error }, 'pruning processed events failed; will retry'))
      .finally(() => {
        running = undefined;
      });
  };
  pass();
  const timer = setInterval(pass, options.intervalMs ?? HOUR_MS);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
