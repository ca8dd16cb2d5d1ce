import type { EventData } from '@sts/events/event-catalogue';
import { EMAIL_MAX_LENGTH, NAME_MAX_LENGTH, plainTextLine } from '@sts/vocabulary/plain-text';

/**
 * Notification types of contract section 6, and one of ours: `alert_endpoint.disabled`, when an alert
 * endpoint that failed for days is switched off (docs/decisions.md, "Alert endpoints and deliveries").
 */
export const NOTIFICATION_TYPES = [
  'member.joined',
  'device.enrolled',
  'device.disabled',
  'billing.updated',
  'threat.alert',
  'alert_endpoint.disabled',
] as const;

export type NotificationType = (typeof NOTIFICATION_TYPES)[number];

/** One item of an organization's feed. The feed is shared by the organization; read state is not. */
export interface FeedItem {
  id: string;
  orgId: string;
  type: NotificationType;
  message: string;
  createdAt: Date;
}

/** A feed item as one user sees it. */
export interface Notification {
  id: string;
  type: NotificationType;
  message: string;
  read: boolean;
  createdAt: Date;
}

/**
 * The read state of one user in one organization: items marked one by one, plus a watermark set by
 * "read all" (every item created at or before it is read). Read-all therefore writes one row however
 * long the feed is, and items created after it are unread.
 */
export interface ReadState {
  readAllBefore: Date | null;
  readIds: ReadonlySet<string>;
}

/** The read rule; repositories implement the same rule in their queries. */
export function isReadBy(item: Pick<FeedItem, 'id' | 'createdAt'>, state: ReadState): boolean {
  if (state.readIds.has(item.id)) return true;
  return state.readAllBefore !== null && item.createdAt.getTime() <= state.readAllBefore.getTime();
}

/** Names and e-mails come from the identity provider: one line of plain text each (`plainTextLine`). */
export function memberJoinedMessage(data: EventData<'member.joined'>): string {
  const name = plainTextLine(data.name, NAME_MAX_LENGTH) || 'A new member';
  return `${name} (${plainTextLine(data.email, EMAIL_MAX_LENGTH)}) joined as ${data.role}`;
}

/** What the mailer keeps about a sent e-mail: never the body and never a secret it carried. */
export interface EmailLogEntry {
  eventId: string;
  recipient: string;
  subject: string;
  template: EmailTemplate;
  sentAt: Date;
}

/** Which template an e-mail was rendered from (the e-mail log's `template` column). */
export type EmailTemplate = 'invite' | 'enrollment_code' | 'payment_failed';

export interface OutgoingEmail {
  to: string;
  subject: string;
  text: string;
  html: string;
}
