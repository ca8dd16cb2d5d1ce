import type { License } from './billing-model';

/** Repositories bound to one unit of work (a transaction or a plain read). */
export interface BillingRepositories {
  /**
   * Records an event id in the ledger of handled events; true the first time, false after. Call it in
   * the same transaction as the effect of the event, so the effect happens once.
   */
  recordEventOnce(eventId: string, eventType: string): Promise<boolean>;
  findLicense(orgId: string): Promise<License | null>;
  /** Inserts the license unless the organization already has one (which is then left unchanged). */
  insertLicenseIfAbsent(license: License): Promise<void>;
}

export interface BillingStore {
  /** Runs work in one transaction. */
  transaction<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T>;
  /** Runs reads without a transaction. */
  read<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T>;
}

export interface Clock {
  now(): Date;
}
