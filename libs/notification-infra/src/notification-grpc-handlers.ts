import type { AsyncHandlers } from '@sts/grpc/service-types';
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

/** notification.v1.NotificationService: proto in, domain call, proto out. */
export function notificationGrpcHandlers(
  service: NotificationService,
): AsyncHandlers<typeof NotificationServiceService> {
  return {
    listNotifications: async (request) => {
      const page = await service.list({
        orgId: request.orgId,
        userId: request.userId,
        limit: request.limit,
        cursor: request.cursor,
        unreadOnly: request.unreadOnly,
      });
      return {
        notifications: page.notifications.map(toProto),
        nextCursor: page.nextCursor,
        unreadCount: page.unreadCount,
      };
    },
    markRead: async (request) => {
      const notification = await service.markRead({
        orgId: request.orgId,
        userId: request.userId,
        notificationId: request.notificationId,
      });
      return { notification: toProto(notification) };
    },
    markAllRead: async (request) => ({
      marked: await service.markAllRead({ orgId: request.orgId, userId: request.userId }),
    }),
  };
}
