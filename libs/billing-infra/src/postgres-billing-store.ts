import { LockMode, type MikroORM } from '@mikro-orm/postgresql';
import type { LicenseRecord } from '@sts/billing-domain/billing-model';
import type { BillingAccount, BillingRepositories, BillingStore } from '@sts/billing-domain/billing-ports';
import { recordEventOnce } from '@sts/db/processed-events';
import { UnitOfWork, type WorkScope } from '@sts/db/unit-of-work';
import type { EventData, EventType } from '@sts/events/event-catalogue';
import { enqueueEvent } from '@sts/outbox/outbox';
import { AccountEntity, LicenseEntity, PaymentEventEntity } from './billing-entities';

/** BillingStore over PostgreSQL (schema `billing`). `onCommitWithEvents` lets the outbox relay publish at once. */
export class PostgresBillingStore implements BillingStore {
  private readonly unit: UnitOfWork;

  constructor(orm: MikroORM, onCommitWithEvents?: () => void) {
    this.unit = new UnitOfWork(orm, { outbox: enqueueEvent, onCommitWithEvents });
  }

  transaction<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T> {
    return this.unit.transaction((scope) => work(new PostgresBillingRepositories(scope)));
  }

  read<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T> {
    return this.unit.autocommit((scope) => work(new PostgresBillingRepositories(scope)));
  }
}

/** A license as the raw read below returns it: node-postgres hands MikroORM's timestamps over as text. */
type LicenseText = Omit<LicenseRecord, 'expiresAt' | 'createdAt' | 'updatedAt' | 'factsAsOf'> & {
  expiresAt: string;
  createdAt: string;
  updatedAt: string;
  factsAsOf: string | null;
};

class PostgresBillingRepositories implements BillingRepositories {
  constructor(private readonly scope: WorkScope) {}

  recordEventOnce(eventId: string, eventType: string): Promise<boolean> {
    return recordEventOnce(this.scope.em, eventId, eventType);
  }

  /** Stripe's ids are text, not the UUIDs of `processed_events`; same rule: the first insert wins. */
  async recordPaymentEventOnce(eventId: string, eventType: string): Promise<boolean> {
    const inserted = await this.scope.em
      .createQueryBuilder(PaymentEventEntity)
      .insert({ eventId, eventType })
      .onConflict('eventId')
      .ignore()
      .execute<{ affectedRows: number }>('run');
    return inserted.affectedRows === 1;
  }

  async isPaymentEventRecorded(eventId: string): Promise<boolean> {
    return (await this.scope.em.count(PaymentEventEntity, { eventId })) > 0;
  }

  async findLicense(orgId: string): Promise<LicenseRecord | null> {
    // Raw: read by every GET /api/session the gateway has not cached (bench/gateway-session.bench.ts: part
    // of what took it from 1,062 to 22,225 req/s with the gateway's caches, docs/benchmarks.md; not measured alone).
    const row = await this.scope.sql.one<LicenseText>(
      `select org_id as "orgId", plan, status, billing_cycle as "billingCycle", expires_at as "expiresAt",
         created_at as "createdAt", updated_at as "updatedAt", subscription_id as "subscriptionId",
         subscription_status as "subscriptionStatus", cancel_at_period_end as "cancelAtPeriodEnd",
         facts_as_of as "factsAsOf"
       from billing.licenses where org_id = ?`,
      [orgId],
    );
    return row ? licenseOf(row) : null;
  }

  async findLicenseForUpdate(orgId: string): Promise<LicenseRecord | null> {
    const row = await this.scope.em.findOne(
      LicenseEntity,
      { orgId },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    return row ? licenseOf(row) : null;
  }

  async insertLicenseIfAbsent(license: LicenseRecord): Promise<void> {
    await this.scope.em
      .createQueryBuilder(LicenseEntity)
      .insert(licenseOf(license))
      .onConflict('orgId')
      .ignore()
      .execute('run');
  }

  async saveLicense(license: LicenseRecord): Promise<void> {
    await this.scope.em.nativeUpdate(
      LicenseEntity,
      { orgId: license.orgId },
      {
        plan: license.plan,
        status: license.status,
        billingCycle: license.billingCycle,
        expiresAt: license.expiresAt,
        updatedAt: license.updatedAt,
        subscriptionId: license.subscriptionId,
        subscriptionStatus: license.subscriptionStatus,
        cancelAtPeriodEnd: license.cancelAtPeriodEnd,
        factsAsOf: license.factsAsOf,
      },
    );
  }

  async findAccount(orgId: string): Promise<BillingAccount | null> {
    const row = await this.scope.em.findOne(AccountEntity, { orgId });
    return row ? accountOf(row) : null;
  }

  async findAccountByCustomer(customerId: string): Promise<BillingAccount | null> {
    const row = await this.scope.em.findOne(AccountEntity, { customerId });
    return row ? accountOf(row) : null;
  }

  async insertAccountIfAbsent(account: BillingAccount): Promise<void> {
    await this.scope.em
      .createQueryBuilder(AccountEntity)
      .insert(accountOf(account))
      .onConflict('orgId')
      .ignore()
      .execute('run');
  }

  async saveCheckoutSession(orgId: string, sessionId: string): Promise<void> {
    await this.scope.em.nativeUpdate(AccountEntity, { orgId }, { checkoutSessionId: sessionId });
  }

  emit<Type extends EventType>(type: Type, data: EventData<Type>): Promise<void> {
    return this.scope.emit(type, data);
  }
}

function licenseOf(row: LicenseRecord | LicenseText): LicenseRecord {
  return {
    orgId: row.orgId,
    plan: row.plan,
    status: row.status,
    billingCycle: row.billingCycle,
    expiresAt: new Date(row.expiresAt),
    createdAt: new Date(row.createdAt),
    updatedAt: new Date(row.updatedAt),
    subscriptionId: row.subscriptionId,
    subscriptionStatus: row.subscriptionStatus,
    cancelAtPeriodEnd: row.cancelAtPeriodEnd,
    factsAsOf: row.factsAsOf === null ? null : new Date(row.factsAsOf),
  };
}

function accountOf(row: BillingAccount): BillingAccount {
  return { orgId: row.orgId, customerId: row.customerId, checkoutSessionId: row.checkoutSessionId };
}
