import { EntitySchema, type Opt } from '@mikro-orm/postgresql';
import { ProcessedEventEntity } from '@sts/db/processed-events';
import type {
  AlertDelivery,
  AlertEndpointWithSecret,
  DeliveryStatus,
} from '@sts/notification-domain/alert-model';
import {
  NOTIFICATION_TYPES,
  type EmailLogEntry,
  type FeedItem,
} from '@sts/notification-domain/notification-model';

/**
 * The tables of the `notification` schema, as its migrations (notification-migrations.ts) leave them: the
 * one description the store queries by, checked against the migrated schema by
 * notification-entities.int-spec.ts. An `enum` property is a text column with PostgreSQL's
 * `<table>_<column>_check` constraint listing the values; a reference to another table is a many-to-one
 * property mapped to the referenced key (`mapToPk`), so rows carry ids. Indexes with an `expression`
 * (partial, ordered) and the generated column are written as PostgreSQL prints them, which the check compares.
 * Notification publishes no events: its schema has no outbox.
 */

const DELIVERY_STATUSES: DeliveryStatus[] = ['pending', 'delivered', 'failed'];

export const FeedItemEntity = new EntitySchema<FeedItem>({
  name: 'FeedItem',
  tableName: 'feed_items',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: { type: 'text', fieldName: 'org_id' },
    type: { enum: true, items: [...NOTIFICATION_TYPES], columnType: 'text' },
    message: { type: 'text' },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
  },
  indexes: [
    {
      // The feed is read newest first per organization, paged by (created_at, id).
      name: 'feed_items_org_created_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING btree (org_id, created_at DESC, id DESC)`,
    },
  ],
});

/** One item marked read by one user. */
export interface NotificationRead {
  notificationId: string;
  userId: string;
  readAt: Date;
}

export const NotificationReadEntity = new EntitySchema<NotificationRead>({
  name: 'NotificationRead',
  tableName: 'notification_reads',
  properties: {
    notificationId: {
      kind: 'm:1',
      entity: 'FeedItem',
      mapToPk: true,
      primary: true,
      fieldName: 'notification_id',
      foreignKeyName: 'notification_reads_notification_id_fkey',
      deleteRule: 'cascade',
      updateRule: 'no action',
    },
    userId: { type: 'text', primary: true, fieldName: 'user_id' },
    readAt: { type: 'datetime', fieldName: 'read_at' },
  },
});

/** Per (organization, user), set by read-all: every item created at or before `readAllBefore` is read. */
export interface ReadWatermark {
  orgId: string;
  userId: string;
  readAllBefore: Date | null;
  updatedAt: Opt<Date>;
}

export const ReadWatermarkEntity = new EntitySchema<ReadWatermark>({
  name: 'ReadWatermark',
  tableName: 'read_watermarks',
  properties: {
    orgId: { type: 'text', primary: true, fieldName: 'org_id' },
    userId: { type: 'text', primary: true, fieldName: 'user_id' },
    readAllBefore: { type: 'datetime', fieldName: 'read_all_before', nullable: true },
    updatedAt: { type: 'datetime', fieldName: 'updated_at', defaultRaw: 'now()' },
  },
});

/** What was e-mailed, for support and audit: never the body, never a token. */
export const EmailLogEntity = new EntitySchema<EmailLogEntry & { id: string }>({
  name: 'EmailLog',
  tableName: 'email_log',
  properties: {
    id: { type: 'uuid', primary: true },
    eventId: { type: 'uuid', fieldName: 'event_id', index: 'email_log_event_idx' },
    recipient: { type: 'text' },
    subject: { type: 'text' },
    template: { type: 'text' },
    sentAt: { type: 'datetime', fieldName: 'sent_at', index: 'email_log_sent_idx' },
  },
});

/**
 * An organization's alert destination, the secret sealed. `failingSince` is the delivery queue's
 * bookkeeping: since when attempts have failed without a success between.
 */
export type AlertEndpointRow = AlertEndpointWithSecret & { failingSince: Opt<Date> | null };

export const AlertEndpointEntity = new EntitySchema<AlertEndpointRow>({
  name: 'AlertEndpoint',
  tableName: 'alert_endpoints',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: { type: 'text', fieldName: 'org_id' },
    url: { type: 'text' },
    description: { type: 'text', nullable: true },
    secretSealed: { type: 'text', fieldName: 'secret_sealed' },
    previousSecretSealed: { type: 'text', fieldName: 'previous_secret_sealed', nullable: true },
    previousSecretExpiresAt: { type: 'datetime', fieldName: 'previous_secret_expires_at', nullable: true },
    failingSince: { type: 'datetime', fieldName: 'failing_since', nullable: true },
    disabledAt: { type: 'datetime', fieldName: 'disabled_at', nullable: true },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
  },
  uniques: [{ name: 'alert_endpoints_org_id_url_key', properties: ['orgId', 'url'] }],
});

/**
 * One message to one endpoint, and how its attempts went. The lease (`lockedUntil`, `leaseToken`) is the
 * delivery queue's; `finishedAt` is derived by the database (generated column).
 */
export type AlertDeliveryRow = AlertDelivery & {
  lockedUntil: Opt<Date> | null;
  leaseToken: Opt<string> | null;
  finishedAt: Opt<Date> | null;
};

export const AlertDeliveryEntity = new EntitySchema<AlertDeliveryRow>({
  name: 'AlertDelivery',
  tableName: 'alert_deliveries',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: { type: 'text', fieldName: 'org_id' },
    endpointId: {
      kind: 'm:1',
      entity: 'AlertEndpoint',
      mapToPk: true,
      fieldName: 'endpoint_id',
      foreignKeyName: 'alert_deliveries_endpoint_id_fkey',
      deleteRule: 'cascade',
      updateRule: 'no action',
    },
    eventType: { type: 'text', fieldName: 'event_type' },
    body: { type: 'text' },
    status: { enum: true, items: DELIVERY_STATUSES, columnType: 'text' },
    attempts: { type: 'integer', default: 0 },
    nextAttemptAt: { type: 'datetime', fieldName: 'next_attempt_at', nullable: true },
    lockedUntil: { type: 'datetime', fieldName: 'locked_until', nullable: true },
    leaseToken: { type: 'uuid', fieldName: 'lease_token', nullable: true },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
    lastAttemptAt: { type: 'datetime', fieldName: 'last_attempt_at', nullable: true },
    lastResponseCode: { type: 'integer', fieldName: 'last_response_code', nullable: true },
    lastError: { type: 'text', fieldName: 'last_error', nullable: true },
    lastDurationMs: { type: 'integer', fieldName: 'last_duration_ms', nullable: true },
    finishedAt: {
      type: 'datetime',
      fieldName: 'finished_at',
      nullable: true,
      generated:
        "(CASE WHEN (status = 'pending'::text) THEN NULL::timestamp with time zone ELSE COALESCE(last_attempt_at, created_at) END) stored",
    },
  },
  indexes: [
    {
      name: 'alert_deliveries_due_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING btree (next_attempt_at) WHERE (status = 'pending'::text)`,
    },
    {
      name: 'alert_deliveries_endpoint_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING btree (endpoint_id, created_at DESC)`,
    },
    {
      name: 'alert_deliveries_finished_idx',
      expression: (table, _columns, name) =>
        `CREATE INDEX ${name} ON ${String(table)} USING btree (finished_at) WHERE (finished_at IS NOT NULL)`,
    },
  ],
});

export const NOTIFICATION_ENTITIES = [
  FeedItemEntity,
  NotificationReadEntity,
  ReadWatermarkEntity,
  EmailLogEntity,
  AlertEndpointEntity,
  AlertDeliveryEntity,
  ProcessedEventEntity,
];
