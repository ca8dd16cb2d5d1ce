import {
  isReadBy,
  type EmailLogEntry,
  type FeedItem,
  type Notification,
  type OutgoingEmail,
} from '../notification-model';
import type { AlertDelivery, AlertEndpointWithSecret } from '../alert-model';
import type { FeedQuery, Mailer, NotificationRepositories, NotificationStore } from '../notification-ports';

interface State {
  processed: Map<string, string>;
  alertEndpoints: AlertEndpointWithSecret[];
  alertDeliveries: AlertDelivery[];
  feed: FeedItem[];
  /** `${userId}|${notificationId}` */
  reads: Set<string>;
  /** `${orgId}|${userId}` -> watermark */
  watermarks: Map<string, Date>;
  emailLog: EmailLogEntry[];
}

/** The ports in memory, with the same rules as the PostgreSQL repositories; transactions roll back on throw. */
export class InMemoryNotificationStore implements NotificationStore {
  state: State = {
    processed: new Map(),
    alertEndpoints: [],
    alertDeliveries: [],
    feed: [],
    reads: new Set(),
    watermarks: new Map(),
    emailLog: [],
  };
  /** Transactions begun, to tell one write per batch from one per event. */
  transactions = 0;
  /** A feed item this picks cannot be written (as a constraint the database enforces would refuse it). */
  refuseFeedItem: (item: FeedItem) => boolean = () => false;

  async transaction<T>(work: (repositories: NotificationRepositories) => Promise<T>): Promise<T> {
    this.transactions++;
    const snapshot = structuredClone(this.state);
    try {
      return await work(this.repositories());
    } catch (error) {
      this.state = snapshot;
      throw error;
    }
  }

  read<T>(work: (repositories: NotificationRepositories) => Promise<T>): Promise<T> {
    return work(this.repositories());
  }

  private repositories(): NotificationRepositories {
    const view = (item: FeedItem, userId: string): Notification => ({
      id: item.id,
      type: item.type,
      message: item.message,
      createdAt: item.createdAt,
      read: isReadBy(item, {
        readAllBefore: this.state.watermarks.get(`${item.orgId}|${userId}`) ?? null,
        readIds: new Set(
          [...this.state.reads]
            .filter((key) => key.startsWith(`${userId}|`))
            .map((key) => key.slice(userId.length + 1)),
        ),
      }),
    });
    /** By creation time, then id (as PostgreSQL orders uuids: lower-case hex compares alike). */
    const oldestFirst = (a: { createdAt: Date; id: string }, b: { createdAt: Date; id: string }) =>
      a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
    const newestFirst = (a: FeedItem, b: FeedItem) => oldestFirst(b, a);

    return {
      recordEventsOnce: (events) => {
        const recorded = new Set<string>();
        for (const { id, type } of events) {
          if (this.state.processed.has(id)) continue;
          this.state.processed.set(id, type);
          recorded.add(id);
        }
        return Promise.resolve(recorded);
      },
      insertFeedItems: (items) => {
        if (items.some(this.refuseFeedItem)) return Promise.reject(new Error('feed item refused'));
        for (const item of items) {
          if (!this.state.feed.some((existing) => existing.id === item.id))
            this.state.feed.push(structuredClone(item));
        }
        return Promise.resolve();
      },
      listFeed: (orgId: string, userId: string, query: FeedQuery) =>
        Promise.resolve(
          this.state.feed
            .filter((item) => item.orgId === orgId)
            .sort(newestFirst)
            .filter((item) => {
              if (!query.after) return true;
              const at = new Date(query.after.at).getTime();
              const t = item.createdAt.getTime();
              return t < at || (t === at && item.id < query.after.id);
            })
            .map((item) => view(item, userId))
            .filter((notification) => !query.unreadOnly || !notification.read)
            .slice(0, query.limit),
        ),
      countUnread: (orgId, userId) =>
        Promise.resolve(
          this.state.feed.filter((item) => item.orgId === orgId && !view(item, userId).read).length,
        ),
      findNotification: (orgId, userId, id) => {
        const item = this.state.feed.find((candidate) => candidate.id === id && candidate.orgId === orgId);
        return Promise.resolve(item ? view(item, userId) : null);
      },
      markRead: (userId, id) => {
        this.state.reads.add(`${userId}|${id}`);
        return Promise.resolve();
      },
      markAllReadUntil: (orgId, userId, at) => {
        const became = this.state.feed.filter(
          (item) =>
            item.orgId === orgId && item.createdAt.getTime() <= at.getTime() && !view(item, userId).read,
        ).length;
        const key = `${orgId}|${userId}`;
        const previous = this.state.watermarks.get(key);
        if (!previous || previous.getTime() < at.getTime()) this.state.watermarks.set(key, at);
        return Promise.resolve(became);
      },
      insertEmailLog: (entry) => {
        this.state.emailLog.push(entry);
        return Promise.resolve();
      },
      listAlertEndpoints: (orgId) =>
        Promise.resolve(
          structuredClone(
            this.state.alertEndpoints.filter((endpoint) => endpoint.orgId === orgId).sort(oldestFirst),
          ),
        ),
      findAlertEndpoint: (orgId, endpointId) =>
        Promise.resolve(
          structuredClone(
            this.state.alertEndpoints.find((e) => e.orgId === orgId && e.id === endpointId) ?? null,
          ),
        ),
      insertAlertEndpoint: (endpoint) => {
        const taken = this.state.alertEndpoints.some(
          (e) => e.orgId === endpoint.orgId && e.url === endpoint.url,
        );
        if (!taken) this.state.alertEndpoints.push(structuredClone(endpoint));
        return Promise.resolve(!taken);
      },
      deleteAlertEndpoint: (orgId, endpointId) => {
        const before = this.state.alertEndpoints.length;
        this.state.alertEndpoints = this.state.alertEndpoints.filter(
          (endpoint) => !(endpoint.orgId === orgId && endpoint.id === endpointId),
        );
        this.state.alertDeliveries = this.state.alertDeliveries.filter(
          (d) => d.endpointId !== endpointId || d.orgId !== orgId,
        );
        return Promise.resolve(this.state.alertEndpoints.length < before);
      },
      enableAlertEndpoint: (orgId, endpointId) => {
        const endpoint = this.state.alertEndpoints.find((e) => e.orgId === orgId && e.id === endpointId);
        if (endpoint) endpoint.disabledAt = null;
        return Promise.resolve(endpoint !== undefined);
      },
      rotateAlertSecret: (orgId, endpointId, rotation) => {
        const endpoint = this.state.alertEndpoints.find((e) => e.orgId === orgId && e.id === endpointId);
        if (endpoint) Object.assign(endpoint, rotation);
        return Promise.resolve(endpoint !== undefined);
      },
      insertAlertDeliveries: (deliveries) => {
        this.state.alertDeliveries.push(...structuredClone(deliveries));
        return Promise.resolve();
      },
      testSendTimes: (orgId, endpointId, since) =>
        Promise.resolve(
          this.state.alertDeliveries
            .filter(
              (d) =>
                d.orgId === orgId &&
                d.endpointId === endpointId &&
                d.eventType === 'alert.test' &&
                d.createdAt > since,
            )
            .map((d) => d.createdAt),
        ),
      listAlertDeliveries: (orgId, endpointId, limit) =>
        Promise.resolve(
          this.state.alertEndpoints.some((e) => e.orgId === orgId && e.id === endpointId)
            ? structuredClone(
                this.state.alertDeliveries
                  .filter((d) => d.orgId === orgId && d.endpointId === endpointId)
                  .sort((a, b) => oldestFirst(b, a))
                  .slice(0, limit),
              )
            : null,
        ),
    };
  }
}

export class RecordingMailer implements Mailer {
  readonly sent: OutgoingEmail[] = [];
  failNext = 0;
  send(email: OutgoingEmail): Promise<void> {
    if (this.failNext > 0) {
      this.failNext -= 1;
      return Promise.reject(new Error('SMTP 451 try again later'));
    }
    this.sent.push(email);
    return Promise.resolve();
  }
}

export { ManualClock } from '@sts/testing/test-clock';
