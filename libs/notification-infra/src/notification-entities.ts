import { EntitySchema } from '@mikro-orm/postgresql';
import type { AlertDelivery, AlertEndpointWithSecret } from '@sts/notification-domain/alert-model';
import type { EmailTemplate, NotificationType } from '@sts/notification-domain/notification-model';

/** Row shapes of the notification schema, mapped by MikroORM. */
export interface FeedItemRow {
  id: string;
  orgId: string;
  type: NotificationType;
  message: string;
  createdAt: Date;
}

/** One item marked read by one user. */
export interface NotificationReadRow {
  notificationId: string;
  userId: string;
  readAt: Date;
}

/** Per (organization, user): every item created at or before `readAllBefore` is read. */
export interface ReadWatermarkRow {
  orgId: string;
  userId: string;
  readAllBefore: Date | null;
  updatedAt: Date;
}

/** What was e-mailed, for support and audit: never the body, never a token. */
export interface EmailLogRow {
  id: string;
  eventId: string;
  recipient: string;
  subject: string;
  template: EmailTemplate;
  sentAt: Date;
}

export const FeedItemEntity = new EntitySchema<FeedItemRow>({
  name: 'FeedItem',
  tableName: 'feed_items',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: { type: 'text', fieldName: 'org_id' },
    type: { type: 'text' },
    message: { type: 'text' },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
  },
});

export const NotificationReadEntity = new EntitySchema<NotificationReadRow>({
  name: 'NotificationRead',
  tableName: 'notification_reads',
  properties: {
    notificationId: { type: 'uuid', primary: true, fieldName: 'notification_id' },
    userId: { type: 'text', primary: true, fieldName: 'user_id' },
    readAt: { type: 'datetime', fieldName: 'read_at' },
  },
});

export const ReadWatermarkEntity = new EntitySchema<ReadWatermarkRow>({
  name: 'ReadWatermark',
  tableName: 'read_watermarks',
  properties: {
    orgId: { type: 'text', primary: true, fieldName: 'org_id' },
    userId: { type: 'text', primary: true, fieldName: 'user_id' },
    readAllBefore: { type: 'datetime', fieldName: 'read_all_before', nullable: true },
    updatedAt: { type: 'datetime', fieldName: 'updated_at' },
  },
});

export const EmailLogEntity = new EntitySchema<EmailLogRow>({
  name: 'EmailLog',
  tableName: 'email_log',
  properties: {
    id: { type: 'uuid', primary: true },
    eventId: { type: 'uuid', fieldName: 'event_id' },
    recipient: { type: 'text' },
    subject: { type: 'text' },
    template: { type: 'text' },
    sentAt: { type: 'datetime', fieldName: 'sent_at' },
  },
});

/** An organization's alert destination; the secret sealed. */
export const AlertEndpointEntity = new EntitySchema<AlertEndpointWithSecret>({
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
    createdAt: { type: 'datetime', fieldName: 'created_at' },
    disabledAt: { type: 'datetime', fieldName: 'disabled_at', nullable: true },
  },
});

/** One message to one endpoint, and how its attempts went. */
export const AlertDeliveryEntity = new EntitySchema<AlertDelivery & { lockedUntil?: Date | null }>({
  name: 'AlertDelivery',
  tableName: 'alert_deliveries',
  properties: {
    id: { type: 'uuid', primary: true },
    orgId: { type: 'text', fieldName: 'org_id' },
    endpointId: { type: 'uuid', fieldName: 'endpoint_id' },
    eventType: { type: 'text', fieldName: 'event_type' },
    body: { type: 'text' },
    status: { type: 'text' },
    attempts: { type: 'integer' },
    nextAttemptAt: { type: 'datetime', fieldName: 'next_attempt_at', nullable: true },
    lockedUntil: { type: 'datetime', fieldName: 'locked_until', nullable: true },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
    lastAttemptAt: { type: 'datetime', fieldName: 'last_attempt_at', nullable: true },
    lastResponseCode: { type: 'integer', fieldName: 'last_response_code', nullable: true },
    lastError: { type: 'text', fieldName: 'last_error', nullable: true },
    lastDurationMs: { type: 'integer', fieldName: 'last_duration_ms', nullable: true },
  },
});

export const NOTIFICATION_ENTITIES = [
  FeedItemEntity,
  NotificationReadEntity,
  ReadWatermarkEntity,
  EmailLogEntity,
  AlertEndpointEntity,
  AlertDeliveryEntity,
];
