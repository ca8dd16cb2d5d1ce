import { EntitySchema } from '@mikro-orm/postgresql';
import type {
  BillingCycle,
  LicenseStatus,
  Plan,
  SubscriptionStatus,
} from '@sts/billing-domain/billing-model';

/** Row shape of the billing schema, mapped by MikroORM. */
export interface LicenseRow {
  orgId: string;
  plan: Plan;
  status: LicenseStatus;
  billingCycle: BillingCycle;
  expiresAt: Date;
  createdAt: Date;
  updatedAt: Date;
  subscriptionId: string | null;
  subscriptionStatus: SubscriptionStatus | null;
  cancelAtPeriodEnd: boolean;
  factsAsOf: Date | null;
}

export const LicenseEntity = new EntitySchema<LicenseRow>({
  name: 'License',
  tableName: 'licenses',
  properties: {
    orgId: { type: 'text', primary: true, fieldName: 'org_id' },
    plan: { type: 'text' },
    status: { type: 'text' },
    billingCycle: { type: 'text', fieldName: 'billing_cycle' },
    expiresAt: { type: 'datetime', fieldName: 'expires_at' },
    createdAt: { type: 'datetime', fieldName: 'created_at' },
    updatedAt: { type: 'datetime', fieldName: 'updated_at' },
    subscriptionId: { type: 'text', fieldName: 'subscription_id', nullable: true },
    subscriptionStatus: { type: 'text', fieldName: 'subscription_status', nullable: true },
    cancelAtPeriodEnd: { type: 'boolean', fieldName: 'cancel_at_period_end' },
    factsAsOf: { type: 'datetime', fieldName: 'facts_as_of', nullable: true },
  },
});

export interface AccountRow {
  orgId: string;
  customerId: string;
  checkoutSessionId: string | null;
}

export const AccountEntity = new EntitySchema<AccountRow>({
  name: 'BillingAccount',
  tableName: 'accounts',
  properties: {
    orgId: { type: 'text', primary: true, fieldName: 'org_id' },
    customerId: { type: 'text', fieldName: 'customer_id', unique: true },
    checkoutSessionId: { type: 'text', fieldName: 'checkout_session_id', nullable: true },
  },
});

export const BILLING_ENTITIES = [LicenseEntity, AccountEntity];
