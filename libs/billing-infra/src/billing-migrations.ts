import { Migration } from '@mikro-orm/migrations';
import type { MigrationEntry } from '@sts/db/service-orm';
import { processedEventsTableSql } from '@sts/db/processed-events';
import type { RetainedTable } from '@sts/db/retention';
import { outboxDeadLetterSql, outboxTableSql, outboxTraceContextSql } from '@sts/outbox/outbox';

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

/**
 * Stripe: each organization's customer, the subscription facts behind its license, the ledger of
 * handled payment events (Stripe's ids are not UUIDs, so not `processed_events`), and the outbox of
 * `billing.updated`.
 */
class StripeBilling extends Migration {
  override up(): void {
    this.addSql(`
      alter table billing.licenses
        add column subscription_id text null,
        add column cancel_at_period_end boolean not null default false,
        add column facts_as_of timestamptz null;
      create table billing.accounts (
        org_id text primary key,
        customer_id text not null unique,
        checkout_session_id text null,
        created_at timestamptz not null default now()
      );
      create table billing.payment_events (
        event_id text primary key,
        event_type text not null,
        received_at timestamptz not null default now()
      );
    `);
    this.addSql(outboxTableSql(BILLING_SCHEMA));
    this.addSql(outboxDeadLetterSql(BILLING_SCHEMA));
  }
}

/**
 * Stripe sends an event again for up to three days, and people can resend one from its dashboard for
 * 30 days; the ledger keeps ids longer than that. (An older event that comes later still changes
 * nothing: licenses keep the time of the facts they hold.)
 */
export const PAYMENT_EVENTS_RETENTION: RetainedTable = {
  table: 'payment_events',
  key: 'event_id',
  timeColumn: 'received_at',
  retentionMs: 45 * 24 * 60 * 60 * 1000,
};

/** The trace context an outbox row carries to the event it becomes (and the parked-rows index). */
class OutboxTraceContext extends Migration {
  override up(): void {
    this.addSql(outboxTraceContextSql(BILLING_SCHEMA));
  }
}

/**
 * Stripe's status of the license's subscription as last applied: a license suspended because its
 * subscription is `unpaid` or `paused` is active again when the subscription is live again, while one
 * whose subscription was deleted stays canceled. Null for licenses stored before (and before any).
 */
class SubscriptionStatus extends Migration {
  override up(): void {
    this.addSql(`
      alter table billing.licenses
        add column subscription_status text null check (subscription_status in
          ('active', 'trialing', 'past_due', 'unpaid', 'paused', 'incomplete', 'incomplete_expired', 'canceled'));
    `);
  }
}

export const BILLING_MIGRATIONS: MigrationEntry[] = [
  { name: '0001_initial_billing_schema', class: InitialBillingSchema },
  { name: '0002_stripe_billing', class: StripeBilling },
  { name: '0003_outbox_trace_context', class: OutboxTraceContext },
  { name: '0004_subscription_status', class: SubscriptionStatus },
];
