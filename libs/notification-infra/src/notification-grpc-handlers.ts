import { AppError } from '@sts/errors/app-error';
import type { AsyncHandlers } from '@sts/grpc/service-types';
import { toPage, toPageRequest } from '@sts/pagination/keyset-cursor';
import { isUuid } from '@sts/vocabulary/identifiers';
import type { Notification } from '@sts/notification-domain/notification-model';
import type { NotificationService } from '@sts/notification-domain/notification-service';
import type {
  NotificationServiceService,
  Notification as ProtoNotification,
} from '@sts/proto/gen/notification/v1/notification';

function toProto(notification: Notification): ProtoNotification {
  return {
    id: notification.id,
    type: notification.type,
    message: notification.message,
    read: notification.read,
    createdAt: notification.createdAt,
  };
}

/** The feed's scope: both ids are required (the gateway always sends them). */
function scopeOf(request: { orgId: string; userId: string }): { orgId: string; userId: string } {
  const fields = [
    ...(request.orgId.trim() ? [] : [{ path: 'org_id', message: 'required' }]),
    ...(request.userId.trim() ? [] : [{ path: 'user_id', message: 'required' }]),
  ];
  if (fields.length > 0)
    throw new AppError('VALIDATION_FAILED', 'org_id and user_id are required', { fields });
  return { orgId: request.orgId, userId: request.userId };
}

/**
 * notification.v1.NotificationService: proto in (validated and paged here, docs/conventions.md),
 * domain call, proto out.
 */
export function notificationGrpcHandlers(
  service: NotificationService,
): AsyncHandlers<typeof NotificationServiceService> {
  return {
    listNotifications: async (request) => {
      const scope = scopeOf(request);
      const page = toPageRequest(request.limit, request.cursor);
      const { rows, unreadCount } = await service.list(scope, page, request.unreadOnly);
      const { items, nextCursor } = toPage(rows, page.limit, (row) => ({
        at: row.createdAt.toISOString(),
        id: row.id,
      }));
      return { notifications: items.map(toProto), nextCursor, unreadCount };
    },
    markRead: async (request) => {
      const scope = scopeOf(request);
      // Not one of our ids: it cannot name a notification (and must not reach SQL as a uuid).
      if (!isUuid(request.notificationId)) throw new AppError('NOTIFICATION_NOT_FOUND');
      const notification = await service.markRead({
        orgId: scope.orgId,
        userId: scope.userId,
        notificationId: request.notificationId,
      });
      return { notification: toProto(notification) };
    },
    markAllRead: async (request) => ({ marked: await service.markAllRead(scopeOf(request)) }),
  };
}
