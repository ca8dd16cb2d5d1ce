import { Migration } from '@mikro-orm/migrations';
import type { MigrationEntry } from '@sts/db/service-orm';
import { processedEventsTableSql } from '@sts/db/processed-events';
import type { RetainedTable } from '@sts/db/retention';

export const NOTIFICATION_SCHEMA = 'notification';

class InitialNotificationSchema extends Migration {
  override up(): void {
    this.addSql(`
      create schema if not exists notification;

      create table notification.feed_items (
        id uuid primary key,
        org_id text not null,
        type text not null
          check (type in ('member.joined', 'device.enrolled', 'device.disabled', 'billing.updated', 'threat.alert')),
        message text not null,
        created_at timestamptz not null
      );
      -- The feed is read newest first per organization, paged by (created_at, id).
      create index feed_items_org_created_idx on notification.feed_items (org_id, created_at desc, id desc);

      create table notification.notification_reads (
        notification_id uuid not null references notification.feed_items (id) on delete cascade,
        user_id text not null,
        read_at timestamptz not null,
        primary key (notification_id, user_id)
      );

      -- Set by read-all: one row per (organization, user), however long the feed is.
      create table notification.read_watermarks (
        org_id text not null,
        user_id text not null,
        read_all_before timestamptz null,
        updated_at timestamptz not null default now(),
        primary key (org_id, user_id)
      );

      create table notification.email_log (
        id uuid primary key,
        event_id uuid not null,
        recipient text not null,
        subject text not null,
        template text not null,
        sent_at timestamptz not null
      );
      create index email_log_sent_idx on notification.email_log (sent_at);
      create index email_log_event_idx on notification.email_log (event_id);
    `);
    this.addSql(processedEventsTableSql(NOTIFICATION_SCHEMA));
  }
}

class AlertEndpointsAndDeliveries extends Migration {
  override up(): void {
    this.addSql(`
      create table notification.alert_endpoints (
        id uuid primary key,
        org_id text not null,
        url text not null,
        description text null,
        -- The signing secret, sealed with SECRET_SEALING_KEY (it must be read to sign, so not hashed);
        -- after a rotation the previous one keeps signing until it expires.
        secret_sealed text not null,
        previous_secret_sealed text null,
        previous_secret_expires_at timestamptz null,
        -- Since when attempts have failed without a success between; disabled after too long.
        failing_since timestamptz null,
        disabled_at timestamptz null,
        created_at timestamptz not null,
        unique (org_id, url)
      );

      -- The durable schedule: one row per message to one endpoint; the worker claims due rows with
      -- FOR UPDATE SKIP LOCKED and leases them (locked_until); lease_token names the claim that may
      -- record the attempt.
      create table notification.alert_deliveries (
        id uuid primary key,
        org_id text not null,
        endpoint_id uuid not null references notification.alert_endpoints (id) on delete cascade,
        event_type text not null,
        body text not null,
        status text not null check (status in ('pending', 'delivered', 'failed')),
        attempts int not null default 0,
        next_attempt_at timestamptz null,
        locked_until timestamptz null,
        lease_token uuid null,
        created_at timestamptz not null,
        last_attempt_at timestamptz null,
        last_response_code int null,
        last_error text null,
        last_duration_ms int null
      );
      create index alert_deliveries_due_idx on notification.alert_deliveries (next_attempt_at)
        where status = 'pending';
      create index alert_deliveries_endpoint_idx on notification.alert_deliveries (endpoint_id, created_at desc);

      alter table notification.feed_items drop constraint feed_items_type_check;
      alter table notification.feed_items add constraint feed_items_type_check check (type in
        ('member.joined', 'device.enrolled', 'device.disabled', 'billing.updated', 'threat.alert',
         'alert_endpoint.disabled'));
    `);
  }
}

/**
 * When a delivery finished: its last attempt, or its creation for one failed without an attempt (its
 * endpoint was disabled first); null while it is pending. Derived by the database, so that every way a
 * delivery ends sets it; finished deliveries expire by it (ALERT_DELIVERIES_RETENTION).
 */
class AlertDeliveriesFinishedAt extends Migration {
  override up(): void {
    this.addSql(`
      alter table notification.alert_deliveries add column finished_at timestamptz
        generated always as (
          case when status = 'pending' then null else coalesce(last_attempt_at, created_at) end
        ) stored;
      create index alert_deliveries_finished_idx on notification.alert_deliveries (finished_at)
        where finished_at is not null;
    `);
  }
}

/**
 * The delivery log keeps a finished delivery 30 days (time to look into a receiver's trouble), so that
 * it holds a bounded history instead of every alert ever sent; pending deliveries never expire.
 */
export const ALERT_DELIVERIES_RETENTION: RetainedTable = {
  table: 'alert_deliveries',
  key: 'id',
  timeColumn: 'finished_at',
  retentionMs: 30 * 24 * 60 * 60 * 1000,
};

export const NOTIFICATION_MIGRATIONS: MigrationEntry[] = [
  { name: '0001_initial_notification_schema', class: InitialNotificationSchema },
  { name: '0002_alert_endpoints_and_deliveries', class: AlertEndpointsAndDeliveries },
  { name: '0003_alert_deliveries_finished_at', class: AlertDeliveriesFinishedAt },
];
