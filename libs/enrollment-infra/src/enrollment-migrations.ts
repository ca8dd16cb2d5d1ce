import { Migration } from '@mikro-orm/migrations';
import type { MigrationEntry } from '@sts/db/service-orm';
import { processedEventsTableSql } from '@sts/db/processed-events';
import { outboxDeadLetterSql, outboxTableSql, outboxTraceContextSql } from '@sts/outbox/outbox';

export const ENROLLMENT_SCHEMA = 'enrollment';

class InitialEnrollmentSchema extends Migration {
  override up(): void {
    this.addSql(`
      -- At most one current key per organization; the key is sealed (AES-256-GCM) and hashed (SHA-256).
      create table enrollment.enrollment_keys (
        org_id uuid primary key,
        key_hash char(64) not null,
        key_sealed text not null,
        created_at timestamptz not null,
        constraint enrollment_keys_key_hash_key unique (key_hash)
      );

      create table enrollment.devices (
        id uuid primary key,
        org_id uuid not null,
        machine_id text not null,
        hostname text not null,
        status text not null check (status in ('active', 'disabled')),
        metadata jsonb not null default '{}'::jsonb check (jsonb_typeof(metadata) = 'object'),
        token_hash char(64) not null,
        enrolled_at timestamptz not null,
        last_seen_at timestamptz not null,
        -- A machine is enrolled in one organization at most: concurrent enrollments elsewhere collide here.
        constraint devices_machine_id_key unique (machine_id),
        constraint devices_token_hash_key unique (token_hash)
      );
      -- Keyset pages of an organization, all devices or one status.
      create index devices_org_enrolled_idx on enrollment.devices (org_id, enrolled_at, id);
      create index devices_org_status_enrolled_idx on enrollment.devices (org_id, status, enrolled_at, id);

      -- Codes are stored as HMAC-SHA256 only.
      create table enrollment.enrollment_codes (
        id uuid primary key,
        org_id uuid not null,
        code_hash char(64) not null,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        consumed_at timestamptz null,
        consumed_by_device_id uuid null,
        constraint enrollment_codes_org_code_hash_key unique (org_id, code_hash)
      ) with (fillfactor = 70);
      -- No index on consumed_by_device_id, and room left in each page: consuming a code is then a HOT
      -- update (no index changes). Deleting a device clears its references within its organization's codes.

      -- Lets a single statement undo itself: raises serialization_failure (40001, "retry") unless ok.
      create function enrollment.retry_unless(ok boolean, message text) returns boolean
        language plpgsql volatile as $fn$
        begin
          if ok is not true then
            raise exception using errcode = '40001', message = message;
          end if;
          return true;
        end
        $fn$;
    `);
    this.addSql(outboxTableSql(ENROLLMENT_SCHEMA));
    this.addSql(processedEventsTableSql(ENROLLMENT_SCHEMA));
  }
}

/**
 * `?q=` matches any part of a hostname or machine id (`ilike '%…%'`), which a b-tree cannot serve:
 * without these, every search read all of an organization's devices (a 10,000-device organization:
 * ~8 ms of PostgreSQL CPU per request). pg_trgm is a trusted extension shipped with PostgreSQL; it
 * goes into this schema unless the database already has it elsewhere, whose operator class is then used.
 * Queries under three characters have no trigrams and keep using the organization's index.
 * New entries wait in a pending list of at most 256 kB (default 4 MB): an enrollment then costs
 * ~40 µs more in PostgreSQL instead of ~100 µs without the list, and searches stay on the index
 * without relying on autovacuum to flush the list (measured; docs/decisions.md).
 */
class DeviceSearchIndexes extends Migration {
  override up(): void {
    this.addSql(`
      do $migration$
      declare
        trgm_schema name;
      begin
        if not exists (select 1 from pg_extension where extname = 'pg_trgm') then
          create extension pg_trgm with schema enrollment;
        end if;
        select n.nspname into trgm_schema
          from pg_extension e join pg_namespace n on n.oid = e.extnamespace
          where e.extname = 'pg_trgm';
        execute format('create index devices_hostname_trgm_idx on enrollment.devices using gin (hostname %I.gin_trgm_ops) with (gin_pending_list_limit = 256)', trgm_schema);
        execute format('create index devices_machine_id_trgm_idx on enrollment.devices using gin (machine_id %I.gin_trgm_ops) with (gin_pending_list_limit = 256)', trgm_schema);
      end
      $migration$;
    `);
  }
}

/** Parked outbox rows (the relay's dead-letter state). */
class OutboxDeadLetter extends Migration {
  override up(): void {
    this.addSql(outboxDeadLetterSql(ENROLLMENT_SCHEMA));
  }
}

/** The trace context an outbox row carries to the event it becomes (and the parked-rows index). */
class OutboxTraceContext extends Migration {
  override up(): void {
    this.addSql(outboxTraceContextSql(ENROLLMENT_SCHEMA));
  }
}

/**
 * An administrator's one-time approval to re-enroll a device without its device token (a reinstall that
 * lost it): until this time, the next enrollment with a valid code takes the device; that clears it.
 * Nullable without a default: adding it rewrites nothing.
 */
class ReEnrollmentApproval extends Migration {
  override up(): void {
    this.addSql(`alter table enrollment.devices add column re_enrollment_allowed_until timestamptz null;`);
  }
}

export const ENROLLMENT_MIGRATIONS: MigrationEntry[] = [
  { name: '0001_initial_enrollment_schema', class: InitialEnrollmentSchema },
  { name: '0002_device_search_indexes', class: DeviceSearchIndexes },
  { name: '0003_outbox_dead_letter', class: OutboxDeadLetter },
  { name: '0004_outbox_trace_context', class: OutboxTraceContext },
  { name: '0005_re_enrollment_approval', class: ReEnrollmentApproval },
];
