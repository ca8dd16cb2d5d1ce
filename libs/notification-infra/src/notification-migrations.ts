import { Migration } from '@mikro-orm/migrations';
import type { MigrationEntry } from '@sts/db/service-orm';
import { processedEventsTableSql } from '@sts/db/processed-events';

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

export const NOTIFICATION_MIGRATIONS: MigrationEntry[] = [
  { name: '0001_initial_notification_schema', class: InitialNotificationSchema },
];
