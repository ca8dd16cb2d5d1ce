import { Migration } from '@mikro-orm/migrations';
import type { MigrationEntry } from '@sts/db/service-orm';
import { processedEventsTableSql } from '@sts/db/processed-events';

export const BILLING_SCHEMA = 'billing';

class InitialBillingSchema extends Migration {
  override up(): void {
    this.addSql(`
      create schema if not exists billing;

      create table billing.licenses (
        org_id text primary key,
        plan text not null check (plan in ('none', 'basic', 'pro', 'enterprise')),
        status text not null check (status in ('pending', 'onboarding', 'active', 'canceled')),
        billing_cycle text not null check (billing_cycle in ('monthly', 'annual')),
        expires_at timestamptz not null,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
    `);
    // Billing publishes nothing yet; the outbox table comes with the first event it emits.
    this.addSql(processedEventsTableSql(BILLING_SCHEMA));
  }
}

export const BILLING_MIGRATIONS: MigrationEntry[] = [
  { name: '0001_initial_billing_schema', class: InitialBillingSchema },
];
