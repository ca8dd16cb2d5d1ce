import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { License } from '@sts/billing-domain/billing-model';
import type { BillingRepositories, BillingStore } from '@sts/billing-domain/billing-ports';
import { recordEventOnce } from '@sts/db/processed-events';
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

  async findLicense(orgId: string): Promise<License | null> {
    const row = await this.em.findOne(LicenseEntity, { orgId }, { disableIdentityMap: true });
    return row ? toLicense(row) : null;
  }

  async insertLicenseIfAbsent(license: License): Promise<void> {
    await this.em.createQueryBuilder(LicenseEntity).insert(license).onConflict('orgId').ignore().execute();
  }
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
