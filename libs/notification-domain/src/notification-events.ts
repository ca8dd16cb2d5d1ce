import { openSealedSecret } from '@sts/crypto/secrets';
import { UnprocessableEventError } from '@sts/events/unprocessable-event';
import { SEALING_CONTEXTS, type DomainEvent } from '@sts/events/event-catalogue';
import { EVENT_CONSUMERS } from '@sts/events/event-consumers';
import type { EventResult } from '@sts/events/event-result';
import { deviceDisabledMessage, threatDetectedMessage, deviceEnrolledMessage } from './device-messages';
import { renderEnrollmentCodeEmail } from './enrollment-code-email';
import { renderInviteEmail } from './invite-email';
import { renderPaymentFailedEmail } from './payment-failed-email';
import type { AlertEndpointWithSecret } from './alert-model';
import { threatDeliveries } from './alert-service';
import { plainTextLine } from '@sts/vocabulary/plain-text';
import {
  memberJoinedMessage,
  type EmailTemplate,
  type NotificationType,
  type OutgoingEmail,
} from './notification-model';
import type { Clock, Mailer, NotificationStore, OrgAdmins } from './notification-ports';

/** The event types that become feed items: taken in batches, many items per transaction. */
export const FEED_EVENT_TYPES = EVENT_CONSUMERS.notification.eventTypes;

/** The event types that send an e-mail: one at a time, on a consumer of their own, so an SMTP outage never holds up the feed. */
export const EMAIL_EVENT_TYPES = EVENT_CONSUMERS['notification-email'].eventTypes;

/**
 * The event types the notifier subscribes to. Each one has a case in `NotificationEventHandler.handle`.
 * `device.enabled` and `device.deleted` are not among them: the feed's types (contract section 6)
 * have no item for them and they send no e-mail.
 */
export const NOTIFICATION_EVENT_TYPES = [...FEED_EVENT_TYPES, ...EMAIL_EVENT_TYPES] as const;

export type NotificationEventType = (typeof NOTIFICATION_EVENT_TYPES)[number];

/** A discriminated union: narrowing on `type` narrows `data`. */
export type NotificationEvent = { [Type in NotificationEventType]: DomainEvent<Type> }[NotificationEventType];

export type FeedEvent = Extract<NotificationEvent, { type: (typeof FEED_EVENT_TYPES)[number] }>;

export type EventOutcome = 'applied' | 'duplicate';

/** The feed item an event becomes. Exhaustive over the feed's event types. */
function feedItemOf(event: FeedEvent): { type: NotificationType; message: string } {
  switch (event.type) {
    case 'member.joined':
      return { type: 'member.joined', message: memberJoinedMessage(event.data) };
    case 'device.enrolled':
      return { type: 'device.enrolled', message: deviceEnrolledMessage(event.data) };
    case 'device.disabled':
      return { type: 'device.disabled', message: deviceDisabledMessage(event.data) };
    case 'threat.detected':
      return { type: 'threat.alert', message: threatDetectedMessage(event.data) };
    case 'billing.updated':
      return { type: 'billing.updated', message: plainTextLine(event.data.summary, 300) };
  }
}

export interface NotificationEventSettings {
  /** Opens sealed secrets of events (SECRET_SEALING_KEY; the context names the event and the field). */
  sealingKey: Buffer;
  /** Base address of the dashboard, for links in e-mails. */
  publicAppUrl: string;
  /** Base address the agent talks to (the gateway), for the enroll command in e-mails. */
  publicApiUrl: string;
}

/**
 * Applies events to the feed and sends e-mails, each effect once per event id: the id goes into the
 * ledger of handled events in the same transaction as the effect, so a redelivery (JetStream is
 * at-least-once) or a second replica that got the same message finds it and does nothing.
 */
export class NotificationEventHandler {
  constructor(
    private readonly store: NotificationStore,
    private readonly mailer: Mailer,
    private readonly admins: OrgAdmins,
    private readonly clock: Clock,
    private readonly settings: NotificationEventSettings,
    /** Called after a commit that scheduled alert deliveries. */
    private readonly wakeDeliveries: () => void = () => undefined,
  ) {}

  async handle(event: NotificationEvent): Promise<EventOutcome> {
    // Exhaustive: adding a type to NOTIFICATION_EVENT_TYPES without a case here does not compile.
    switch (event.type) {
      case 'member.joined':
      case 'device.enrolled':
      case 'device.disabled':
      case 'threat.detected':
      case 'billing.updated': {
        const [outcome] = await this.addFeedItems([event]);
        return outcome as EventOutcome;
      }
      case 'invite.created':
        return this.sendEmails(event, 'invite', () => [
          renderInviteEmail({
            to: event.data.email,
            orgName: event.data.org_name,
            invitedByName: event.data.invited_by_name,
            role: event.data.role,
            token: this.open(
              event.data.token_sealed,
              SEALING_CONTEXTS.inviteToken(event.data),
              'invite token',
            ),
            expiresAt: new Date(event.data.expires_at),
            publicAppUrl: this.settings.publicAppUrl,
          }),
        ]);
      case 'enrollment_code.email_requested':
        return this.sendEmails(event, 'enrollment_code', () => [
          renderEnrollmentCodeEmail({
            to: event.data.email,
            orgName: event.data.org_name,
            requestedByName: event.data.requested_by_name,
            code: this.open(
              event.data.code_sealed,
              SEALING_CONTEXTS.enrollmentCode(event.data),
              'enrollment code',
            ),
            enrollmentKey: this.open(
              event.data.enrollment_key_sealed,
              SEALING_CONTEXTS.enrollmentKey(event.data),
              'enrollment key',
            ),
            expiresAt: new Date(event.data.expires_at),
            publicApiUrl: this.settings.publicApiUrl,
          }),
        ]);
      case 'billing.payment_failed':
        return this.emailAdmins(event);
    }
  }

  /**
   * The payment-failed e-mail, to each ORG_ADMIN of the organization (asked of identity when the
   * event is handled, so whoever is an admin then gets it). One ledger entry covers them all: if a
   * send fails, the event is retried and the admins reached before may get it twice (see `sendEmails`).
   */
  private async emailAdmins(event: DomainEvent<'billing.payment_failed'>): Promise<EventOutcome> {
    const recipients = await this.admins.emailsOf(event.data.org_id);
    return this.sendEmails(event, 'payment_failed', () =>
      recipients.map((to) =>
        renderPaymentFailedEmail({
          to,
          amountDue: event.data.amount_due,
          currency: event.data.currency,
          invoiceUrl: event.data.invoice_url,
          nextAttemptAt: event.data.next_attempt_at ? new Date(event.data.next_attempt_at) : null,
          publicAppUrl: this.settings.publicAppUrl,
        }),
      ),
    );
  }

  /**
   * Feed events of a batch, in one transaction; if that fails, each in a transaction of its own, so
   * that one event that cannot be written does not hold back the others. One result per event, in order.
   */
  async handleFeedBatch(events: readonly FeedEvent[]): Promise<EventResult[]> {
    try {
      return (await this.addFeedItems(events)).map((outcome) => ({ outcome }));
    } catch {
      const results: EventResult[] = [];
      for (const event of events) {
        try {
          const [outcome] = await this.addFeedItems([event]);
          results.push({ outcome });
        } catch (error) {
          results.push({ error });
        }
      }
      return results;
    }
  }

  /**
   * One feed item per event, in the event's organization, once per event id; a threat detection also
   * schedules one alert delivery per endpoint of its organization, in the same transaction.
   */
  private async addFeedItems(events: readonly FeedEvent[]): Promise<EventOutcome[]> {
    let scheduled = 0;
    const outcomes = await this.store.transaction(async (repos) => {
      const firstSeen = await repos.recordEventsOnce(
        events.map((event) => ({ id: event.id, type: event.type })),
      );
      // An event can also come twice within one batch (published again after the duplicate window):
      // only its first copy is applied.
      const seen = new Set<string>();
      const applied = events.map((event) => {
        const first = firstSeen.has(event.id) && !seen.has(event.id);
        seen.add(event.id);
        return first;
      });
      // The feed item takes the event's id (one item per event) and the time it enters the feed,
      // not the time of the event: read-all marks what was in the feed when the user pressed it,
      // so an event that arrives late must not be hidden by an earlier read-all.
      // A batch shares one clock reading; its items are a millisecond apart (the last at now) so the
      // feed, newest first by time, keeps the stream's order (a tie would fall to the random ids).
      const createdAt = this.clock.now();
      const fresh = events.filter((_event, index) => applied[index]);
      const items = fresh.map((event, index) => {
        const { type, message } = feedItemOf(event);
        const at = new Date(createdAt.getTime() - (fresh.length - 1 - index));
        return { id: event.id, orgId: event.data.org_id, type, message, createdAt: at };
      });
      await repos.insertFeedItems(items);
      // One delivery per endpoint of the organization, for every threat of the batch: endpoints read
      // once per organization, deliveries written in one statement.
      const threats = events.filter(
        (event, index): event is Extract<FeedEvent, { type: 'threat.detected' }> =>
          event.type === 'threat.detected' && applied[index] === true,
      );
      const endpointsByOrg = new Map<string, AlertEndpointWithSecret[]>();
      for (const orgId of new Set(threats.map((threat) => threat.data.org_id))) {
        endpointsByOrg.set(orgId, await repos.listAlertEndpoints(orgId));
      }
      const deliveries = threats.flatMap((threat) =>
        threatDeliveries(threat, endpointsByOrg.get(threat.data.org_id) ?? [], this.settings, createdAt),
      );
      await repos.insertAlertDeliveries(deliveries);
      scheduled = deliveries.length;
      return applied.map((first): EventOutcome => (first ? 'applied' : 'duplicate'));
    });
    if (scheduled > 0) this.wakeDeliveries();
    return outcomes;
  }

  /**
   * Sends an event's e-mails once per event id (one ledger entry covers them all). Order: claim the event id in the ledger (the row lock also makes a
   * concurrent replica wait for our outcome), render (opening sealed secrets), send, write the e-mail
   * log, commit. If opening or sending fails, the transaction rolls back and the error makes the
   * consumer nak the message, so it is retried.
   *
   * At-least-once window, accepted: if the process dies or the commit fails after the SMTP server
   * accepted the message, the claim is rolled back and the redelivered event sends a second e-mail.
   * Sending is not transactional, so "exactly once" is not on offer; this keeps the window to the
   * moments between the SMTP reply and the commit.
   *
   * The log row holds the recipient, subject and template only: never the body or a secret it carried.
   */
  private sendEmails(
    event: NotificationEvent,
    template: EmailTemplate,
    render: () => OutgoingEmail[],
  ): Promise<EventOutcome> {
    return this.store.transaction(async (repos) => {
      if (!(await repos.recordEventsOnce([{ id: event.id, type: event.type }])).has(event.id))
        return 'duplicate';
      for (const email of render()) {
        await this.mailer.send(email);
        await repos.insertEmailLog({
          eventId: event.id,
          recipient: email.to,
          subject: email.subject,
          template,
          sentAt: this.clock.now(),
        });
      }
      return 'applied';
    });
  }

  private open(sealed: string, context: string, what: string): string {
    try {
      return openSealedSecret(sealed, this.settings.sealingKey, context);
    } catch (error) {
      // Neither the sealed value nor anything derived from it goes into the message.
      throw new UnprocessableEventError(
        `cannot open the sealed ${what} (a SECRET_SEALING_KEY unlike the producer's, or an event altered or replayed with other data)`,
        {
          cause: error,
        },
      );
    }
  }
}
