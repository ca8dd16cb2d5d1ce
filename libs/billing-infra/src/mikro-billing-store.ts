import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { License } from '@sts/billing-domain/billing-model';
import type { BillingRepositories, BillingStore } from '@sts/billing-domain/billing-ports';
import { recordEventOnce } from '@sts/db/processed-events';
import { sqlRunner } from '@sts/db/sql-runner';
import { LicenseEntity, type LicenseRow } from './billing-entities';

/** BillingStore over PostgreSQL (schema `billing`). */
export class MikroBillingStore implements BillingStore {
  constructor(private readonly orm: MikroORM) {}

  transaction<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T> {
    return this.orm.em.fork().transactional((tx) => work(new BillingRepositoriesSql(tx)));
  }

  read<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T> {
    return work(new BillingRepositoriesSql(this.orm.em.fork()));
  }
}

class BillingRepositoriesSql implements BillingRepositories {
  constructor(private readonly em: EntityManager) {}

  recordEventOnce(eventId: string, eventType: string): Promise<boolean> {
    return recordEventOnce(this.em, eventId, eventType);
  }

  /** On the hot path of every GET /api/session: plain SQL, no ORM hydration. */
  async findLicense(orgId: string): Promise<License | null> {
    const row = await sqlRunner(this.em).one<LicenseSqlRow>(
      `select org_id, plan, status, billing_cycle, expires_at, created_at, updated_at from billing.licenses where org_id = ?`,
      [orgId],
    );
    return row
      ? toLicense({
          orgId: row.org_id,
          plan: row.plan,
          status: row.status,
          billingCycle: row.billing_cycle,
          expiresAt: new Date(row.expires_at),
          createdAt: new Date(row.created_at),
          updatedAt: new Date(row.updated_at),
        })
      : null;
  }

  async insertLicenseIfAbsent(license: License): Promise<void> {
    await this.em.createQueryBuilder(LicenseEntity).insert(license).onConflict('orgId').ignore().execute();
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
}

function toLicense(row: LicenseRow): License {
  return {
    orgId: row.orgId,
    plan: row.plan,
    status: row.status,
    billingCycle: row.billingCycle,
    expiresAt: row.expiresAt,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}
