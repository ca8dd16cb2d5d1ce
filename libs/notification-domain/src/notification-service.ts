import { AppError } from '@sts/errors/app-error';
import type { PageRequest } from '@sts/pagination/keyset-cursor';
import type { Notification } from './notification-model';
import type { Clock, NotificationStore } from './notification-ports';

export interface FeedScope {
  orgId: string;
  userId: string;
}

export interface FeedRows {
  rows: Notification[];
  /** Unread items of the whole feed for this user (not only this page). */
  unreadCount: number;
}

/** The feed of an organization as one user sees it: newest first, read state per user. */
export class NotificationService {
  constructor(
    private readonly store: NotificationStore,
    private readonly clock: Clock,
  ) {}

  /**
   * Up to `page.limit + 1` items after the page's position (one more than asked, so the caller can
   * tell whether another page follows: `toPage`), and the unread count of the whole feed.
   */
  async list(scope: FeedScope, page: PageRequest, unreadOnly = false): Promise<FeedRows> {
    return this.store.read(async (repos) => {
      const rows = await repos.listFeed(scope.orgId, scope.userId, {
        limit: page.limit + 1,
        after: page.after,
        unreadOnly,
      });
      return { rows, unreadCount: await repos.countUnread(scope.orgId, scope.userId) };
    });
  }

  /**
   * Marks one notification read for the user and returns it. Idempotent. An id that is unknown or
   * belongs to another organization is NOTIFICATION_NOT_FOUND (no hint that it exists elsewhere).
   */
  async markRead(input: FeedScope & { notificationId: string }): Promise<Notification> {
    return this.store.transaction(async (repos) => {
      const notification = await repos.findNotification(input.orgId, input.userId, input.notificationId);
      if (!notification) throw new AppError('NOTIFICATION_NOT_FOUND');
      if (!notification.read) await repos.markRead(input.userId, notification.id, this.clock.now());
      return { ...notification, read: true };
    });
  }

  /** Marks everything in the feed read for the user; returns how many became read. Idempotent. */
  async markAllRead(input: FeedScope): Promise<number> {
    return this.store.transaction((repos) =>
      repos.markAllReadUntil(input.orgId, input.userId, this.clock.now()),
    );
  }
}
