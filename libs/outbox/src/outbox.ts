import { EntitySchema, type EntityManager, type Opt } from '@mikro-orm/postgresql';
import { parseEventData, type DomainEvent, type EventType } from '@sts/events/event-catalogue';
import { newEnvelope, type EventEnvelope } from '@sts/events/event-envelope';
import { EVENT_RETENTION_MS } from '@sts/events/subjects';
import { currentTraceHeaders, type TraceHeaders } from '@sts/observability/trace-context';

/** DDL of the per-service outbox. Include it in the service's first migration. */
export function outboxTableSql(schema: string): string {
  return `create table if not exists "${schema}"."outbox" (
    "id" uuid not null primary key,
    "type" text not null,
    "envelope" jsonb not null,
    "created_at" timestamptz not null default clock_timestamp(),
    "published_at" timestamptz null,
    "attempts" integer not null default 0,
    "last_error" text null
  );
  create index if not exists "outbox_unpublished_idx" on "${schema}"."outbox" ("created_at") where "published_at" is null;`;
}

/**
 * Adds the dead-letter state: a row the relay gave up on (after `maxAttempts` failures while other
 * rows went through) is parked there, kept, and no longer blocks the rows behind it. Include it in a
 * migration after the one that creates the outbox. To publish a parked row again:
 * `update <schema>.outbox set dead_lettered_at = null, attempts = 0 where id = '…'`.
 */
export function outboxDeadLetterSql(schema: string): string {
  return `alter table "${schema}"."outbox" add column if not exists "dead_lettered_at" timestamptz null;
  drop index if exists "${schema}"."outbox_unpublished_idx";
  create index if not exists "outbox_pending_idx" on "${schema}"."outbox" ("created_at") where "published_at" is null and "dead_lettered_at" is null;`;
}

/**
 * Adds the trace context of the change that wrote a row (W3C headers, null while tracing is off), so
 * that the event the relay publishes later continues that change's trace; and an index for the count
 * of parked rows the metrics report. Include it in a migration after `outboxDeadLetterSql`.
 */
export function outboxTraceContextSql(schema: string): string {
  return `alter table "${schema}"."outbox" add column if not exists "trace_context" jsonb null;
  create index if not exists "outbox_parked_idx" on "${schema}"."outbox" ("created_at") where "published_at" is null and "dead_lettered_at" is not null;`;
}

/** One outbox row, as the three functions above leave the table. */
export interface OutboxRow {
  id: string;
  type: string;
  envelope: EventEnvelope;
  createdAt: Opt<Date>;
  publishedAt: Date | null;
  attempts: Opt<number>;
  lastError: string | null;
  /** Set when the relay parked the row (dead letter). */
  deadLetteredAt: Date | null;
  /** The writing change's trace context, when it was traced. */
  traceContext: TraceHeaders | null;
}

/**
 * The outbox table of every schema that publishes. Its partial indexes are written as PostgreSQL prints
 * them (`pg_get_indexdef`): the schema generator compares such indexes by name only, so `entitySchemaDrift`
 * (`@sts/db/entity-schema-drift`) compares their definitions itself.
 */
export const OutboxEntity = new EntitySchema<OutboxRow>({
  name: 'OutboxRow',
  tableName: 'outbox',
  properties: {
    id: { type: 'uuid', primary: true },
    type: { type: 'text' },
    envelope: { type: 'json', columnType: 'jsonb' },
    createdAt: { type: 'datetime', fieldName: 'created_at', defaultRaw: 'clock_timestamp()' },
    publishedAt: { type: 'datetime', fieldName: 'published_at', nullable: true },
    attempts: { type: 'integer', default: 0 },
    lastError: { type: 'text', fieldName: 'last_error', nullable: true },
    deadLetteredAt: { type: 'datetime', fieldName: 'dead_lettered_at', nullable: true },
    traceContext: { type: 'json', columnType: 'jsonb', fieldName: 'trace_context', nullable: true },
  },
  indexes: [
    {
      name: 'outbox_pending_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING btree (created_at) WHERE ((published_at IS NULL) AND (dead_lettered_at IS NULL))`,
    },
    {
      name: 'outbox_parked_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING btree (created_at) WHERE ((published_at IS NULL) AND (dead_lettered_at IS NOT NULL))`,
    },
  ],
});

/**
 * How long outbox rows are kept (a `RetainedTable` of @sts/db/retention, applied by the service host):
 * published rows as long as the stream keeps their events; unpublished and parked rows (null) never expire.
 */
export const OUTBOX_RETENTION = {
  table: 'outbox',
  key: 'id',
  timeColumn: 'published_at',
  retentionMs: EVENT_RETENTION_MS,
};

/** The envelope of an outbox row: data validated against the catalogue. */
function outboxEnvelope<Type extends EventType>(
  type: Type,
  data: DomainEvent<Type>['data'],
  now = new Date(),
): DomainEvent<Type> {
  return newEnvelope(type, parseEventData(type, data), now);
}

/**
 * The outbox row as one part of a caller's own statement (`with …, event as (<sql>) select …`), for a
 * store whose whole change is one measured statement: the same row `enqueueEvent` writes, inserted only
 * when `condition` (SQL over the statement's earlier parts) holds. Returns the part and its parameters.
 * Raw SQL: a part of the caller's raw statement (enrollment's one round trip, bench/enrollment.bench.ts).
 */
export function outboxInsertPart<Type extends EventType>(
  schema: string,
  type: Type,
  data: DomainEvent<Type>['data'],
  condition: string,
  now = new Date(),
): { sql: string; params: unknown[] } {
  const envelope = outboxEnvelope(type, data, now);
  return {
    sql: `insert into "${schema}"."outbox" (id, type, envelope, trace_context) select ?, ?, ?::jsonb, ?::jsonb where ${condition} returning id`,
    params: [envelope.id, envelope.type, JSON.stringify(envelope), traceContextColumn()],
  };
}

/**
 * Writes an event to the outbox inside the caller's transaction: the event exists if and only if
 * the change that caused it was committed. Data is validated against the catalogue first.
 */
export async function enqueueEvent<Type extends EventType>(
  em: EntityManager,
  type: Type,
  data: DomainEvent<Type>['data'],
): Promise<DomainEvent<Type>> {
  const envelope = outboxEnvelope(type, data);
  await em.insert(OutboxEntity, {
    id: envelope.id,
    type: envelope.type,
    envelope,
    traceContext: currentTraceHeaders() ?? null,
  });
  return envelope;
}

function traceContextColumn(): string | null {
  const headers = currentTraceHeaders();
  return headers ? JSON.stringify(headers) : null;
}
