import { AppError } from '@sts/errors/app-error';
import type { AsyncHandlers } from '@sts/grpc/service-types';
import { toPage, toPageRequest } from '@sts/pagination/keyset-cursor';
import { isUuid } from '@sts/vocabulary/identifiers';
import type { Notification } from '@sts/notification-domain/notification-model';
import type { NotificationService } from '@sts/notification-domain/notification-service';
import type {
  AlertDelivery as ProtoAlertDelivery,
  AlertEndpoint as ProtoAlertEndpoint,
  NotificationServiceService,
  Notification as ProtoNotification,
} from '@sts/proto/gen/notification/v1/notification';
import {
  validAlertDescription,
  validAlertUrl,
  type AlertDelivery,
  type AlertEndpoint,
} from '@sts/notification-domain/alert-model';
import type { AlertService } from '@sts/notification-domain/alert-service';

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
  alerts: AlertService,
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
    listAlertEndpoints: async (request) => {
      const orgId = orgOf(request);
      return { endpoints: (await alerts.list(orgId)).map(endpointToProto) };
    },
    createAlertEndpoint: async (request) => {
      const orgId = orgOf(request);
      const url = validAlertUrl(request.url);
      const description = validAlertDescription(request.description);
      const { endpoint, secret } = await alerts.create(orgId, url, description);
      return { endpoint: endpointToProto(endpoint), secret };
    },
    deleteAlertEndpoint: async (request) => {
      const orgId = orgOf(request);
      // Not one of our ids: it cannot name an endpoint (and must not reach SQL as a uuid).
      if (!isUuid(request.endpointId)) throw new AppError('ALERT_ENDPOINT_NOT_FOUND');
      await alerts.delete(orgId, request.endpointId);
      return {};
    },
    sendTestAlert: async (request) => {
      const orgId = orgOf(request);
      if (!isUuid(request.endpointId)) throw new AppError('ALERT_ENDPOINT_NOT_FOUND');
      return { delivery: deliveryToProto(await alerts.sendTest(orgId, request.endpointId)) };
    },
    enableAlertEndpoint: async (request) => {
      const orgId = orgOf(request);
      if (!isUuid(request.endpointId)) throw new AppError('ALERT_ENDPOINT_NOT_FOUND');
      return { endpoint: endpointToProto(await alerts.enable(orgId, request.endpointId)) };
    },
    rotateAlertSecret: async (request) => {
      const orgId = orgOf(request);
      if (!isUuid(request.endpointId)) throw new AppError('ALERT_ENDPOINT_NOT_FOUND');
      const rotated = await alerts.rotateSecret(orgId, request.endpointId);
      return {
        endpoint: endpointToProto(rotated.endpoint),
        secret: rotated.secret,
        previousSecretExpiresAt: rotated.previousSecretExpiresAt,
      };
    },
    listAlertDeliveries: async (request) => {
      const orgId = orgOf(request);
      if (!isUuid(request.endpointId)) throw new AppError('ALERT_ENDPOINT_NOT_FOUND');
      const { limit } = toPageRequest(request.limit, '');
      const deliveries = await alerts.deliveries(orgId, request.endpointId, limit);
      return { deliveries: deliveries.map(deliveryToProto) };
    },
  };
}

function orgOf(request: { orgId: string }): string {
  if (!request.orgId.trim()) {
    throw new AppError('VALIDATION_FAILED', 'org_id is required', {
      fields: [{ path: 'org_id', message: 'required' }],
    });
  }
  return request.orgId;
}

function endpointToProto(endpoint: AlertEndpoint): ProtoAlertEndpoint {
  return {
    id: endpoint.id,
    url: endpoint.url,
    description: endpoint.description ?? '',
    createdAt: endpoint.createdAt,
    disabledAt: endpoint.disabledAt ?? undefined,
  };
}

function deliveryToProto(delivery: AlertDelivery): ProtoAlertDelivery {
  return {
    id: delivery.id,
    endpointId: delivery.endpointId,
    eventType: delivery.eventType,
    status: delivery.status,
    attempts: delivery.attempts,
    lastResponseCode: delivery.lastResponseCode ?? 0,
    lastError: delivery.lastError ?? '',
    lastDurationMs: delivery.lastDurationMs ?? 0,
    nextAttemptAt: delivery.nextAttemptAt ?? undefined,
    createdAt: delivery.createdAt,
    lastAttemptAt: delivery.lastAttemptAt ?? undefined,
  };
}
