import { EntitySchema, type EntityManager, type Opt } from '@mikro-orm/postgresql';
import { EVENT_RETENTION_MS } from '@sts/events/subjects';
import type { RetainedTable } from './retention';

/**
 * How long a handled event's id is kept. An event can be redelivered only while the stream holds it
 * (counted from publication, which comes before handling); a day more for clocks.
 */
export const PROCESSED_EVENTS_RETENTION: RetainedTable = {
  table: 'processed_events',
  key: 'event_id',
  timeColumn: 'processed_at',
  retentionMs: EVENT_RETENTION_MS + 24 * 60 * 60 * 1000,
};

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

/** One handled event, in the ledger of every schema that consumes events (`processedEventsTableSql`). */
export interface ProcessedEvent {
  eventId: string;
  eventType: string;
  processedAt: Opt<Date>;
}

export const ProcessedEventEntity = new EntitySchema<ProcessedEvent>({
  name: 'ProcessedEvent',
  tableName: 'processed_events',
  properties: {
    eventId: { type: 'uuid', primary: true, fieldName: 'event_id' },
    eventType: { type: 'text', fieldName: 'event_type' },
    processedAt: { type: 'datetime', fieldName: 'processed_at', defaultRaw: 'now()' },
  },
});

/** Returns true the first time an event id is seen (the caller then applies the effect), false after. */
export async function recordEventOnce(
  em: EntityManager,
  eventId: string,
  eventType: string,
): Promise<boolean> {
  return (await recordEventsOnce(em, [{ id: eventId, type: eventType }])).has(eventId);
}

/**
 * The batch form of `recordEventOnce`, in one statement: returns the ids seen for the first time (the
 * caller applies their effects in the same transaction); the others were handled before.
 */
export async function recordEventsOnce(
  em: EntityManager,
  events: readonly { id: string; type: string }[],
): Promise<Set<string>> {
  if (events.length === 0) return new Set();
  const rows = await em
    .createQueryBuilder(ProcessedEventEntity)
    .insert(events.map((event) => ({ eventId: event.id, eventType: event.type })))
    .onConflict('eventId')
    .ignore()
    .returning('eventId')
    .execute<Pick<ProcessedEvent, 'eventId'>[]>('all');
  return new Set(rows.map((row) => row.eventId));
}
