import type { License } from '../billing-model';
import type { BillingRepositories, BillingStore } from '../billing-ports';

interface State {
  processed: Map<string, string>;
  licenses: Map<string, License>;
}

/** The ports in memory, with the same rules as the PostgreSQL repositories; transactions roll back on throw. */
export class InMemoryBillingStore implements BillingStore {
  state: State = { processed: new Map(), licenses: new Map() };

  async transaction<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T> {
    const snapshot = structuredClone(this.state);
    try {
      return await work(this.repositories());
    } catch (error) {
      this.state = snapshot;
      throw error;
    }
  }

  read<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T> {
    return work(this.repositories());
  }

  private repositories(): BillingRepositories {
    return {
      recordEventOnce: (eventId, eventType) => {
        if (this.state.processed.has(eventId)) return Promise.resolve(false);
        this.state.processed.set(eventId, eventType);
        return Promise.resolve(true);
      },
      findLicense: (orgId) => Promise.resolve(structuredClone(this.state.licenses.get(orgId) ?? null)),
      insertLicenseIfAbsent: (license) => {
        if (!this.state.licenses.has(license.orgId))
          this.state.licenses.set(license.orgId, structuredClone(license));
        return Promise.resolve();
      },
    };
  }
}

export { ManualClock } from '@sts/testing/test-clock';
