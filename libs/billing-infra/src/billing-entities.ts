import { EntitySchema, type Opt } from '@mikro-orm/postgresql';
import {
  BILLING_CYCLES,
  LICENSE_STATUSES,
  PLANS,
  SUBSCRIPTION_STATUSES,
  type LicenseRecord,
} from '@sts/billing-domain/billing-model';
import type { BillingAccount } from '@sts/billing-domain/billing-ports';
import { ProcessedEventEntity } from '@sts/db/processed-events';
import { OutboxEntity } from '@sts/outbox/outbox';

/**
 * The tables of the `billing` schema, as its migrations (billing-migrations.ts) leave them: the one
 * description the store queries by, checked against the migrated schema by billing-entities.int-spec.ts.
 * An `enum` property is a text column with PostgreSQL's `<table>_<column>_check` constraint listing the
 * values.
 */
export const LicenseEntity = new EntitySchema<LicenseRecord>({
  name: 'License',
  tableName: 'licenses',
  properties: {
    orgId: { type: 'text', primary: true, fieldName: 'org_id' },
    plan: { enum: true, items: [...PLANS], columnType: 'text' },
    status: { enum: true, items: [...LICENSE_STATUSES], columnType: 'text' },
    billingCycle: { enum: true, items: [...BILLING_CYCLES], columnType: 'text', fieldName: 'billing_cycle' },
    expiresAt: { type: 'datetime', fieldName: 'expires_at' },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
    updatedAt: { type: 'datetime', fieldName: 'updated_at' },
    subscriptionId: { type: 'text', fieldName: 'subscription_id', nullable: true },
    subscriptionStatus: {
      enum: true,
      items: [...SUBSCRIPTION_STATUSES],
      columnType: 'text',
      fieldName: 'subscription_status',
      nullable: true,
    },
    cancelAtPeriodEnd: { type: 'boolean', fieldName: 'cancel_at_period_end', default: false },
    factsAsOf: { type: 'datetime', fieldName: 'facts_as_of', nullable: true },
  },
});

/** The organization's Stripe customer; `createdAt` is the database's. */
export const AccountEntity = new EntitySchema<BillingAccount & { createdAt: Opt<Date> }>({
  name: 'BillingAccount',
  tableName: 'accounts',
  properties: {
    orgId: { type: 'text', primary: true, fieldName: 'org_id' },
    customerId: { type: 'text', fieldName: 'customer_id', unique: 'accounts_customer_id_key' },
    checkoutSessionId: { type: 'text', fieldName: 'checkout_session_id', nullable: true },
    createdAt: { type: 'datetime', fieldName: 'created_at', defaultRaw: 'now()' },
  },
});

/** The ledger of handled Stripe events (their ids are Stripe's, not the UUIDs of `processed_events`). */
export const PaymentEventEntity = new EntitySchema<{
  eventId: string;
  eventType: string;
  receivedAt: Opt<Date>;
}>({
  name: 'PaymentEvent',
  tableName: 'payment_events',
  properties: {
    eventId: { type: 'text', primary: true, fieldName: 'event_id' },
    eventType: { type: 'text', fieldName: 'event_type' },
    receivedAt: { type: 'datetime', fieldName: 'received_at', defaultRaw: 'now()' },
  },
});

export const BILLING_ENTITIES = [
  LicenseEntity,
  AccountEntity,
  PaymentEventEntity,
  OutboxEntity,
  ProcessedEventEntity,
];
