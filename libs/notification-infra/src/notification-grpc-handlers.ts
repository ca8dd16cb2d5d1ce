import { requireText, requireUuid } from '@sts/grpc/request-checks';
import type { AsyncHandlers } from '@sts/grpc/service-types';
import { toPage, toPageRequest } from '@sts/pagination/keyset-cursor';
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

/**
 * The feed's scope: both ids are required (the gateway always sends them, from the caller's context).
 * Not requireUuidField: the feed keys them as text, and client principals' user ids are not UUIDs.
 */
function scopeOf(request: { orgId: string; userId: string }): { orgId: string; userId: string } {
  return { orgId: requireText(request.orgId, 'org_id'), userId: requireText(request.userId, 'user_id') };
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
      const notification = await service.markRead({
        orgId: scope.orgId,
        userId: scope.userId,
        notificationId: requireUuid(request.notificationId, 'NOTIFICATION_NOT_FOUND'),
      });
      return { notification: toProto(notification) };
    },
    markAllRead: async (request) => ({ marked: await service.markAllRead(scopeOf(request)) }),
    listAlertEndpoints: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      return { endpoints: (await alerts.list(orgId)).map(endpointToProto) };
    },
    createAlertEndpoint: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      const url = validAlertUrl(request.url);
      const description = validAlertDescription(request.description);
      const { endpoint, secret } = await alerts.create(orgId, url, description);
      return { endpoint: endpointToProto(endpoint), secret };
    },
    deleteAlertEndpoint: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      await alerts.delete(orgId, requireUuid(request.endpointId, 'ALERT_ENDPOINT_NOT_FOUND'));
      return {};
    },
    sendTestAlert: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      const endpointId = requireUuid(request.endpointId, 'ALERT_ENDPOINT_NOT_FOUND');
      return { delivery: deliveryToProto(await alerts.sendTest(orgId, endpointId)) };
    },
    enableAlertEndpoint: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      const endpointId = requireUuid(request.endpointId, 'ALERT_ENDPOINT_NOT_FOUND');
      return { endpoint: endpointToProto(await alerts.enable(orgId, endpointId)) };
    },
    rotateAlertSecret: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      const rotated = await alerts.rotateSecret(
        orgId,
        requireUuid(request.endpointId, 'ALERT_ENDPOINT_NOT_FOUND'),
      );
      return {
        endpoint: endpointToProto(rotated.endpoint),
        secret: rotated.secret,
        previousSecretExpiresAt: rotated.previousSecretExpiresAt,
      };
    },
    listAlertDeliveries: async (request) => {
      const orgId = requireText(request.orgId, 'org_id');
      const endpointId = requireUuid(request.endpointId, 'ALERT_ENDPOINT_NOT_FOUND');
      const { limit } = toPageRequest(request.limit, '');
      const deliveries = await alerts.deliveries(orgId, endpointId, limit);
      return { deliveries: deliveries.map(deliveryToProto) };
    },
  };
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
