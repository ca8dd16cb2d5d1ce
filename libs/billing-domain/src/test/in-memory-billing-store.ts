import { UniqueConflict } from '@sts/errors/unique-conflict';
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

/**
 * The ports in memory, with the same rules as the PostgreSQL repositories (held to them by
 * billing-store-contract.ts). Transactions run one at a time, each on a copy of the state that replaces
 * it when the work returns: a rollback (the work throws) drops only its own copy, reads see committed
 * state only, and a license read for update stays as read until the transaction ends, as under
 * PostgreSQL's row lock.
 */
export class InMemoryBillingStore implements BillingStore {
  state: State = {
    processed: new Map(),
    paymentEvents: new Map(),
    licenses: new Map(),
    accounts: new Map(),
    emitted: [],
  };

  /** The transaction running or last queued; the next one starts when it ends. */
  private queue: Promise<unknown> = Promise.resolve();

  transaction<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T> {
    const turn = this.queue.then(async () => {
      const draft = structuredClone(this.state);
      const result = await work(this.repositories(draft));
      this.state = draft;
      return result;
    });
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  read<T>(work: (repositories: BillingRepositories) => Promise<T>): Promise<T> {
    return work(this.repositories(this.state));
  }

  /** The data of the emitted events of one type. */
  emittedOf<Type extends EventType>(type: Type): EventData<Type>[] {
    return this.state.emitted
      .filter((event) => event.type === type)
      .map((event) => event.data as EventData<Type>);
  }

  private repositories(state: State): BillingRepositories {
    const findLicense = (orgId: string) =>
      Promise.resolve(structuredClone(state.licenses.get(orgId) ?? null));
    const findAccount = (orgId: string) =>
      Promise.resolve(structuredClone(state.accounts.get(orgId) ?? null));
    return {
      recordEventOnce: (eventId, eventType) => {
        if (state.processed.has(eventId)) return Promise.resolve(false);
        state.processed.set(eventId, eventType);
        return Promise.resolve(true);
      },
      recordPaymentEventOnce: (eventId, eventType) => {
        if (state.paymentEvents.has(eventId)) return Promise.resolve(false);
        state.paymentEvents.set(eventId, eventType);
        return Promise.resolve(true);
      },
      isPaymentEventRecorded: (eventId) => Promise.resolve(state.paymentEvents.has(eventId)),
      findLicense,
      findLicenseForUpdate: findLicense,
      insertLicenseIfAbsent: (license) => {
        if (!state.licenses.has(license.orgId)) {
          state.licenses.set(license.orgId, structuredClone(license));
        }
        return Promise.resolve();
      },
      // An update of the row there is: no license is created, and the creation time stays.
      saveLicense: (license) => {
        const stored = state.licenses.get(license.orgId);
        if (stored) {
          state.licenses.set(license.orgId, { ...structuredClone(license), createdAt: stored.createdAt });
        }
        return Promise.resolve();
      },
      findAccount,
      findAccountByCustomer: (customerId) =>
        Promise.resolve(
          structuredClone(
            [...state.accounts.values()].find((account) => account.customerId === customerId) ?? null,
          ),
        ),
      insertAccountIfAbsent: (account) => {
        if (state.accounts.has(account.orgId)) return Promise.resolve();
        // customer_id is unique: another organization's customer is a conflict, not an account.
        if ([...state.accounts.values()].some((other) => other.customerId === account.customerId)) {
          return Promise.reject(new UniqueConflict());
        }
        state.accounts.set(account.orgId, structuredClone(account));
        return Promise.resolve();
      },
      saveCheckoutSession: (orgId, sessionId) => {
        const account = state.accounts.get(orgId);
        if (account) account.checkoutSessionId = sessionId;
        return Promise.resolve();
      },
      emit: (type, data) => {
        state.emitted.push({ type, data: structuredClone(data) });
        return Promise.resolve();
      },
    };
  }
}

export { ManualClock } from '@sts/testing/test-clock';
