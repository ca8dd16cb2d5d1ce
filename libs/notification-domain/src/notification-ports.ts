import type { AlertDelivery, AlertEndpointWithSecret } from './alert-model';
import type { EmailLogEntry, FeedItem, Notification, OutgoingEmail } from './notification-model';
import type { KeysetPosition } from '@sts/pagination/keyset-cursor';
import type { AttemptResult } from './alert-delivery-policy';

export interface FeedQuery {
  limit: number;
  /** Position of the last item of the previous page (newest first: items strictly older follow). */
  after: KeysetPosition | null;
  unreadOnly: boolean;
}

/** Repositories bound to one unit of work (a transaction or a plain read). */
export interface NotificationRepositories {
  /**
   * Records event ids in the ledger of handled events and returns those recorded for the first time.
   * Call it in the same transaction as the effects, so each effect happens once.
   */
  recordEventsOnce(events: readonly { id: string; type: string }[]): Promise<Set<string>>;

  /** Inserts feed items; an item with the same id already present is left as it is. */
  insertFeedItems(items: readonly FeedItem[]): Promise<void>;
  /** The organization's feed as `userId` sees it, newest first (created_at, then id, descending). */
  listFeed(orgId: string, userId: string, query: FeedQuery): Promise<Notification[]>;
  countUnread(orgId: string, userId: string): Promise<number>;
  /** Scoped by organization: an id of another organization is simply not found. */
  findNotification(orgId: string, userId: string, notificationId: string): Promise<Notification | null>;
  /** Marks one item read for the user; idempotent. */
  markRead(userId: string, notificationId: string, at: Date): Promise<void>;
  /**
   * Moves the user's read-all watermark in the organization to `at` (never backwards) and returns
   * how many items became read by it (items that were unread and created at or before `at`).
   */
  markAllReadUntil(orgId: string, userId: string, at: Date): Promise<number>;

  insertEmailLog(entry: EmailLogEntry): Promise<void>;

  /** The organization's alert endpoints, oldest first, with their sealed secrets. */
  listAlertEndpoints(orgId: string): Promise<AlertEndpointWithSecret[]>;
  /** One endpoint of the organization, locked until the transaction ends; null when not the organization's. */
  findAlertEndpoint(orgId: string, endpointId: string): Promise<AlertEndpointWithSecret | null>;
  /** Inserts an endpoint; false when the organization already has one with this URL. */
  insertAlertEndpoint(endpoint: AlertEndpointWithSecret): Promise<boolean>;
  /** Scoped by organization: an id of another organization is simply not found (false). */
  deleteAlertEndpoint(orgId: string, endpointId: string): Promise<boolean>;
  /** Clears `disabledAt` (and the failure streak); false when not the organization's. */
  enableAlertEndpoint(orgId: string, endpointId: string): Promise<boolean>;
  /** Stores a rotated secret and the previous one with its expiry; false when not the organization's. */
  rotateAlertSecret(
    orgId: string,
    endpointId: string,
    rotation: { secretSealed: string; previousSecretSealed: string; previousSecretExpiresAt: Date },
  ): Promise<boolean>;
  insertAlertDeliveries(deliveries: readonly AlertDelivery[]): Promise<void>;
  /** The creation times of the endpoint's test messages created after `since` (any order). */
  testSendTimes(orgId: string, endpointId: string, since: Date): Promise<Date[]>;
  /** An endpoint's deliveries, newest first; null when the endpoint is not the organization's. */
  listAlertDeliveries(orgId: string, endpointId: string, limit: number): Promise<AlertDelivery[] | null>;
}

/** A delivery claimed by the worker for one attempt, with what the attempt needs. */
export interface ClaimedDelivery {
  /** Names this claim: only it may record the attempt. */
  leaseToken: string;
  delivery: AlertDelivery;
  endpoint: Pick<
    AlertEndpointWithSecret,
    'id' | 'orgId' | 'url' | 'secretSealed' | 'previousSecretSealed' | 'previousSecretExpiresAt'
  >;
}

/** What an attempt leaves behind on its delivery. */
export interface AttemptRecord {
  status: AlertDelivery['status'];
  nextAttemptAt: Date | null;
  at: Date;
  responseCode: number | null;
  error: string | null;
  durationMs: number;
}

/**
 * The durable schedule of deliveries. A claim leases due deliveries to one worker (other processes
 * skip them) until the lease ends; recording the attempt releases it. A worker that dies mid-attempt
 * leaves the lease to run out, and the delivery is claimed again.
 */
export interface AlertDeliveryQueue {
  /** Leases up to `limit` due deliveries for `leaseMs` (the database's clock). */
  claimDue(limit: number, leaseMs: number): Promise<ClaimedDelivery[]>;
  /**
   * Records the attempt on its delivery and the endpoint's health: a delivered message ends the
   * endpoint's failure streak, a failed one starts it if none is running. Returns when the streak began,
   * and whether the attempt was recorded (false when the claim no longer holds the delivery).
   */
  recordAttempt(
    delivery: ClaimedDelivery,
    record: AttemptRecord,
  ): Promise<{ recorded: boolean; failingSince: Date | null }>;
  /**
   * Switches the endpoint off (once): its pending deliveries fail, and `notice` goes into the feed.
   * False when it was already disabled or is gone.
   */
  disableEndpoint(endpoint: { id: string; orgId: string }, at: Date, notice: FeedItem): Promise<boolean>;
}

/** Sends one signed message; resolves with what happened (it never throws for the receiver's doing). */
export interface AlertSender {
  send(request: { url: string; headers: Record<string, string>; body: string }): Promise<AttemptResult>;
}

export interface NotificationStore {
  /** Runs work in one transaction. */
  transaction<T>(work: (repositories: NotificationRepositories) => Promise<T>): Promise<T>;
  /** Runs reads without a transaction. */
  read<T>(work: (repositories: NotificationRepositories) => Promise<T>): Promise<T>;
}

/** Who administers an organization (identity's members with the ORG_ADMIN role). */
export interface OrgAdmins {
  emailsOf(orgId: string): Promise<string[]>;
}

/** Sends one e-mail; resolves once the SMTP server accepted it, rejects otherwise. */
export interface Mailer {
  send(email: OutgoingEmail): Promise<void>;
}

export interface Clock {
  now(): Date;
}
