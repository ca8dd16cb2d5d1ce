import type { EventData, EventType } from '@sts/events/event-catalogue';
import type { LicenseRecord } from '../billing-model';
import type { BillingAccount, BillingRepositories, BillingStore } from '../billing-ports';

interface State {
  processed: Map<string, string>;
  paymentEvents: Map<string, string>;
  licenses: Map<string, LicenseRecord>;
  accounts: Map<string, BillingAccount>;
  /** The outbox: events of committed transactions, in order. */
  emitted: { type: EventType; data: unknown }[];
}

/** The ports in memory, with the same rules as the PostgreSQL repositories; transactions roll back on throw. */
export class InMemoryBillingStore implements BillingStore {
  state: State = {
    processed: new Map(),
    paymentEvents: new Map(),
    licenses: new Map(),
    accounts: new Map(),
    emitted: [],
  };

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

  /** The data of the emitted events of one type. */
  emittedOf<Type extends EventType>(type: Type): EventData<Type>[] {
    return this.state.emitted
      .filter((event) => event.type === type)
      .map((event) => event.data as EventData<Type>);
  }

  private repositories(): BillingRepositories {
    const findLicense = (orgId: string) =>
      Promise.resolve(structuredClone(this.state.licenses.get(orgId) ?? null));
    const findAccount = (orgId: string) =>
      Promise.resolve(structuredClone(this.state.accounts.get(orgId) ?? null));
    return {
      recordEventOnce: (eventId, eventType) => {
        if (this.state.processed.has(eventId)) return Promise.resolve(false);
        this.state.processed.set(eventId, eventType);
        return Promise.resolve(true);
      },
      recordPaymentEventOnce: (eventId, eventType) => {
        if (this.state.paymentEvents.has(eventId)) return Promise.resolve(false);
        this.state.paymentEvents.set(eventId, eventType);
        return Promise.resolve(true);
      },
      isPaymentEventRecorded: (eventId) => Promise.resolve(this.state.paymentEvents.has(eventId)),
      findLicense,
      findLicenseForUpdate: findLicense,
      insertLicenseIfAbsent: (license) => {
        if (!this.state.licenses.has(license.orgId)) {
          this.state.licenses.set(license.orgId, structuredClone(license));
        }
        return Promise.resolve();
      },
      saveLicense: (license) => {
        this.state.licenses.set(license.orgId, structuredClone(license));
        return Promise.resolve();
      },
      findAccount,
      findAccountByCustomer: (customerId) =>
        Promise.resolve(
          structuredClone(
            [...this.state.accounts.values()].find((account) => account.customerId === customerId) ?? null,
          ),
        ),
      insertAccountIfAbsent: (account) => {
        if (!this.state.accounts.has(account.orgId))
          this.state.accounts.set(account.orgId, structuredClone(account));
        return Promise.resolve();
      },
      saveCheckoutSession: (orgId, sessionId) => {
        const account = this.state.accounts.get(orgId);
        if (account) account.checkoutSessionId = sessionId;
        return Promise.resolve();
      },
      emit: (type, data) => {
        this.state.emitted.push({ type, data: structuredClone(data) });
        return Promise.resolve();
      },
    };
  }
}

export { ManualClock } from '@sts/testing/test-clock';
