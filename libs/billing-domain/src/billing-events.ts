import type { DomainEvent } from '@sts/events/event-catalogue';
import { EVENT_CONSUMERS } from '@sts/events/event-consumers';
import { initialLicense } from './billing-model';
import type { BillingStore } from './billing-ports';

/** The event types billing subscribes to. Each one has a case in `BillingEventHandler.handle`. */
export const BILLING_EVENT_TYPES = EVENT_CONSUMERS.billing.eventTypes;

export type BillingEventType = (typeof BILLING_EVENT_TYPES)[number];

/** A discriminated union: narrowing on `type` narrows `data`. */
export type BillingEvent = { [Type in BillingEventType]: DomainEvent<Type> }[BillingEventType];

export type EventOutcome = 'applied' | 'duplicate';

/**
 * Applies events once per event id: the id goes into the ledger of handled events in the same
 * transaction as the effect (JetStream delivers at least once).
 */
export class BillingEventHandler {
  constructor(private readonly store: BillingStore) {}

  handle(event: BillingEvent): Promise<EventOutcome> {
    // Exhaustive: adding a type to BILLING_EVENT_TYPES without a case here does not compile.
    switch (event.type) {
      case 'org.created':
        return this.onOrgCreated(event);
    }
  }

  /**
   * The initial license, unless one exists (GetLicense may have created it first; it is then left
   * as it is). The evaluation window starts when the organization was created.
   */
  private onOrgCreated(event: DomainEvent<'org.created'>): Promise<EventOutcome> {
    return this.store.transaction(async (repos) => {
      if (!(await repos.recordEventOnce(event.id, event.type))) return 'duplicate';
      await repos.insertLicenseIfAbsent(initialLicense(event.data.org_id, new Date(event.data.created_at)));
      return 'applied';
    });
  }
}
