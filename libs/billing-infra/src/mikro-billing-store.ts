import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { LicenseRecord } from '@sts/billing-domain/billing-model';
import type { BillingAccount, BillingRepositories, BillingStore } from '@sts/billing-domain/billing-ports';
import { recordEventOnce } from '@sts/db/processed-events';
import { sqlRunner } from '@sts/db/sql-runner';
import type { EventData, EventType } from '@sts/events/event-catalogue';
import { enqueueEvent } from '@sts/outbox/outbox';
import { AccountEntity, LicenseEntity, type AccountRow, type LicenseRow } from './billing-entities';

/** BillingStore over PostgreSQL (schema `billing`). `onCommitWithEvents` lets the outbox relay publish at once. */
export class MikroBillingStore implements BillingStore {
  constructor(
    private readonly orm: MikroORM,
    private readonly onCommitWithEvents: () => void = () => undefined,
  ) {}

  async transaction<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T> {
    const counters = { emitted: 0 };
    const result = await this.orm.em
      .fork()
      .transactional((tx) => work(new BillingRepositoriesSql(tx, counters)));
    if (counters.emitted > 0) this.onCommitWithEvents();
    return result;
  }

  read<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T> {
    return work(new BillingRepositoriesSql(this.orm.em.fork(), { emitted: 0 }));
  }
}

const LICENSE_COLUMNS = `org_id, plan, status, billing_cycle, expires_at, created_at, updated_at,
  subscription_id, subscription_status, cancel_at_period_end, facts_as_of`;

class BillingRepositoriesSql implements BillingRepositories {
  constructor(
    private readonly em: EntityManager,
    private readonly counters: { emitted: number },
  ) {}

  recordEventOnce(eventId: string, eventType: string): Promise<boolean> {
    return recordEventOnce(this.em, eventId, eventType);
  }

  /** Stripe's ids are text, not the UUIDs of `processed_events`; same rule: the first insert wins. */
  async recordPaymentEventOnce(eventId: string, eventType: string): Promise<boolean> {
    const inserted = await sqlRunner(this.em).run(
      `insert into billing.payment_events (event_id, event_type) values (?, ?) on conflict do nothing`,
      [eventId, eventType],
    );
    return inserted === 1;
  }

  async isPaymentEventRecorded(eventId: string): Promise<boolean> {
    return (
      (await sqlRunner(this.em).one('select 1 from billing.payment_events where event_id = ?', [eventId])) !==
      null
    );
  }

  /** On the hot path of every GET /api/session: plain SQL, no ORM hydration. */
  async findLicense(orgId: string): Promise<LicenseRecord | null> {
    const row = await sqlRunner(this.em).one<LicenseSqlRow>(
      `select ${LICENSE_COLUMNS} from billing.licenses where org_id = ?`,
      [orgId],
    );
    return row ? toLicense(row) : null;
  }

  /** Plain SQL for the row lock (`for update`), which serializes changes to one license. */
  async findLicenseForUpdate(orgId: string): Promise<LicenseRecord | null> {
    const row = await sqlRunner(this.em).one<LicenseSqlRow>(
      `select ${LICENSE_COLUMNS} from billing.licenses where org_id = ? for update`,
      [orgId],
    );
    return row ? toLicense(row) : null;
  }

  async insertLicenseIfAbsent(license: LicenseRecord): Promise<void> {
    await this.em
      .createQueryBuilder(LicenseEntity)
      .insert(toRow(license))
      .onConflict('orgId')
      .ignore()
      .execute();
  }

  async saveLicense(license: LicenseRecord): Promise<void> {
    const row = toRow(license);
    await this.em.nativeUpdate(
      LicenseEntity,
      { orgId: row.orgId },
      {
        plan: row.plan,
        status: row.status,
        billingCycle: row.billingCycle,
        expiresAt: row.expiresAt,
        updatedAt: row.updatedAt,
        subscriptionId: row.subscriptionId,
        subscriptionStatus: row.subscriptionStatus,
        cancelAtPeriodEnd: row.cancelAtPeriodEnd,
        factsAsOf: row.factsAsOf,
      },
    );
  }

  async findAccount(orgId: string): Promise<BillingAccount | null> {
    const row = await this.em.findOne(AccountEntity, { orgId }, { disableIdentityMap: true });
    return row ? toAccount(row) : null;
  }

  async findAccountByCustomer(customerId: string): Promise<BillingAccount | null> {
    const row = await this.em.findOne(AccountEntity, { customerId }, { disableIdentityMap: true });
    return row ? toAccount(row) : null;
  }

  async insertAccountIfAbsent(account: BillingAccount): Promise<void> {
    await this.em
      .createQueryBuilder(AccountEntity)
      .insert({
        orgId: account.orgId,
        customerId: account.customerId,
        checkoutSessionId: account.checkoutSessionId,
      })
      .onConflict('orgId')
      .ignore()
      .execute();
  }

  async saveCheckoutSession(orgId: string, sessionId: string): Promise<void> {
    await this.em.nativeUpdate(AccountEntity, { orgId }, { checkoutSessionId: sessionId });
  }

  async emit<Type extends EventType>(type: Type, data: EventData<Type>): Promise<void> {
    await enqueueEvent(this.em, type, data);
    this.counters.emitted += 1;
  }
}

interface LicenseSqlRow {
  org_id: string;
  plan: LicenseRow['plan'];
  status: LicenseRow['status'];
  billing_cycle: LicenseRow['billingCycle'];
  expires_at: Date;
  created_at: Date;
  updated_at: Date;
  subscription_id: string | null;
  subscription_status: LicenseRow['subscriptionStatus'];
  cancel_at_period_end: boolean;
  facts_as_of: Date | null;
}

function toLicense(row: LicenseSqlRow): LicenseRecord {
  return {
    orgId: row.org_id,
    plan: row.plan,
    status: row.status,
    billingCycle: row.billing_cycle,
    expiresAt: new Date(row.expires_at),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
    subscriptionId: row.subscription_id,
    subscriptionStatus: row.subscription_status,
    cancelAtPeriodEnd: row.cancel_at_period_end,
    factsAsOf: row.facts_as_of ? new Date(row.facts_as_of) : null,
  };
}

function toRow(license: LicenseRecord): LicenseRow {
  return {
    orgId: license.orgId,
    plan: license.plan,
    status: license.status,
    billingCycle: license.billingCycle,
    expiresAt: license.expiresAt,
    createdAt: license.createdAt,
    updatedAt: license.updatedAt,
    subscriptionId: license.subscriptionId,
    subscriptionStatus: license.subscriptionStatus,
    cancelAtPeriodEnd: license.cancelAtPeriodEnd,
    factsAsOf: license.factsAsOf,
  };
}

function toAccount(row: AccountRow): BillingAccount {
  return { orgId: row.orgId, customerId: row.customerId, checkoutSessionId: row.checkoutSessionId };
}
