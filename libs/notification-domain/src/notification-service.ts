import { AppError } from '@sts/errors/app-error';
import { isUuid } from '@sts/vocabulary/identifiers';
import { toPage, toPageRequest } from '@sts/pagination/keyset-cursor';
import type { Notification } from './notification-model';
import type { Clock, NotificationStore } from './notification-ports';

export interface FeedScope {
  orgId: string;
  userId: string;
}

export interface ListNotificationsInput extends FeedScope {
  /** 0 or absent: the default page size (50); at most 200. */
  limit?: number;
  /** Opaque cursor from a previous page's `nextCursor`; empty for the first page. */
  cursor?: string;
  unreadOnly?: boolean;
}

export interface NotificationPage {
  notifications: Notification[];
  /** Empty on the last page. */
  nextCursor: string;
  /** Unread items of the whole feed for this user (not only this page). */
  unreadCount: number;
}

/** The feed of an organization as one user sees it: newest first, read state per user. */
export class NotificationService {
  constructor(
    private readonly store: NotificationStore,
    private readonly clock: Clock,
  ) {}

  async list(input: ListNotificationsInput): Promise<NotificationPage> {
    requireScope(input);
    const page = toPageRequest(input.limit, input.cursor);
    if (page.after && !isUuid(page.after.id)) {
      throw new AppError('VALIDATION_FAILED', 'cursor is not valid', {
        fields: [{ path: 'cursor', message: 'invalid cursor' }],
      });
    }
    return this.store.read(async (repos) => {
      const rows = await repos.listFeed(input.orgId, input.userId, {
        limit: page.limit + 1,
        after: page.after,
        unreadOnly: input.unreadOnly ?? false,
      });
      const unreadCount = await repos.countUnread(input.orgId, input.userId);
      const { items, nextCursor } = toPage(rows, page.limit, (row) => ({
        at: row.createdAt.toISOString(),
        id: row.id,
      }));
      return { notifications: items, nextCursor, unreadCount };
    });
  }

  /**
   * Marks one notification read for the user and returns it. Idempotent. An id that is unknown or
   * belongs to another organization is NOTIFICATION_NOT_FOUND (no hint that it exists elsewhere).
   */
  async markRead(input: FeedScope & { notificationId: string }): Promise<Notification> {
    requireScope(input);
    if (!isUuid(input.notificationId)) throw new AppError('NOTIFICATION_NOT_FOUND');
    return this.store.transaction(async (repos) => {
      const notification = await repos.findNotification(input.orgId, input.userId, input.notificationId);
      if (!notification) throw new AppError('NOTIFICATION_NOT_FOUND');
      if (!notification.read) await repos.markRead(input.userId, notification.id, this.clock.now());
      return { ...notification, read: true };
    });
  }

  /** Marks everything in the feed read for the user; returns how many became read. Idempotent. */
  async markAllRead(input: FeedScope): Promise<number> {
    requireScope(input);
    return this.store.transaction((repos) =>
      repos.markAllReadUntil(input.orgId, input.userId, this.clock.now()),
    );
  }
}

function requireScope(scope: FeedScope): void {
  const fields = [
    ...(scope.orgId.trim() ? [] : [{ path: 'org_id', message: 'required' }]),
    ...(scope.userId.trim() ? [] : [{ path: 'user_id', message: 'required' }]),
  ];
  if (fields.length > 0)
    throw new AppError('VALIDATION_FAILED', 'org_id and user_id are required', { fields });
}
