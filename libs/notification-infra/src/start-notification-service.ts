import { readFile } from 'node:fs/promises';
import { registerService } from '@sts/grpc/grpc-server';
import { AlertService } from '@sts/notification-domain/alert-service';
import type { Logger } from '@sts/logger/create-logger';
import { NotificationEventHandler } from '@sts/notification-domain/notification-events';
import { NotificationService } from '@sts/notification-domain/notification-service';
import { NotificationServiceService } from '@sts/proto/gen/notification/v1/notification';
import { runServiceHost, type RunningService } from '@sts/service-host/service-host';
import { startAlertDeliveryWorker } from './alert-delivery-worker';
import { httpsAlertSender } from './https-alert-sender';
import { privateNetworksWarning } from './private-networks';
import { PostgresAlertDeliveryQueue, PostgresNotificationStore } from './postgres-notification-store';
import type { NotificationConfig } from './notification-config';
import { NOTIFICATION_ENTITIES } from './notification-entities';
import { notificationGrpcHandlers } from './notification-grpc-handlers';
import {
  ALERT_DELIVERIES_RETENTION,
  NOTIFICATION_MIGRATIONS,
  NOTIFICATION_SCHEMA,
} from './notification-migrations';
import { createSmtpMailer } from './smtp-mailer';
import { IdentityOrgAdmins } from './identity-org-admins';
import { createPromiseClient } from '@sts/grpc/grpc-client';
import { ServiceTokenIssuer } from '@sts/grpc/service-token';
import { loadGrpcTls } from '@sts/grpc/grpc-tls';
import { IdentityServiceService } from '@sts/proto/gen/identity/v1/identity';

export type { RunningService } from '@sts/service-host/service-host';

/** The e-mail's durable JetStream consumer (the feed's is named after the service). */
export const NOTIFICATION_EMAIL_CONSUMER = 'notification-email';

/**
 * Notification: the feed (items from events, per-user read state) and outgoing e-mail (invitations,
 * enrollment codes with agent installation instructions).
 */
export function startNotificationService(
  config: NotificationConfig,
  logger: Logger,
): Promise<RunningService> {
  return runServiceHost(
    {
      name: 'notification',
      database: {
        schema: NOTIFICATION_SCHEMA,
        entities: NOTIFICATION_ENTITIES,
        migrations: NOTIFICATION_MIGRATIONS,
        publishesEvents: false,
        retainedTables: [ALERT_DELIVERIES_RETENTION],
      },
      config,
      logger,
    },
    async (host) => {
      const mailer = createSmtpMailer({ url: config.SMTP_URL, from: config.MAIL_FROM, logger });
      host.onShutdown('smtp', () => mailer.close());
      const store = new PostgresNotificationStore(host.orm);
      const clock = { now: () => new Date() };
      const sealingKey = Buffer.from(config.SECRET_SEALING_KEY, 'base64');
      const privateNetworks = privateNetworksWarning(config.ALERT_ALLOW_PRIVATE_NETWORKS);
      if (privateNetworks) logger.warn({ allowed: config.ALERT_ALLOW_PRIVATE_NETWORKS }, privateNetworks);
      const deliveries = startAlertDeliveryWorker({
        queue: new PostgresAlertDeliveryQueue(host.orm),
        sender: httpsAlertSender({
          timeoutMs: config.ALERT_ATTEMPT_TIMEOUT_MS,
          allowPrivateNetworks: config.ALERT_ALLOW_PRIVATE_NETWORKS,
          extraCa: config.ALERT_EXTRA_CA_FILE
            ? await readFile(config.ALERT_EXTRA_CA_FILE, 'utf8')
            : undefined,
        }),
        sealingKey,
        clock,
        logger,
        concurrency: config.ALERT_DELIVERY_CONCURRENCY,
        leaseMs: config.ALERT_ATTEMPT_TIMEOUT_MS * 3,
        disableAfterMs: config.ALERT_DISABLE_AFTER_HOURS * 3_600_000,
      });
      host.onShutdown('alert deliveries', () => deliveries.stop());
      const identity = createPromiseClient(
        IdentityServiceService,
        config.IDENTITY_GRPC_ADDRESS,
        config.GRPC_DEADLINE_MS,
        {
          issuer: new ServiceTokenIssuer(config.SERVICE_SIGNING_KEY, 'notification'),
          target: 'identity',
        },
        loadGrpcTls(config),
      );
      host.onShutdown('identity client', () => identity.close());
      const events = new NotificationEventHandler(
        store,
        mailer,
        new IdentityOrgAdmins(identity),
        clock,
        { sealingKey, publicAppUrl: config.PUBLIC_APP_URL, publicApiUrl: config.PUBLIC_API_URL },
        () => deliveries.wake(),
      );
      const alerts = new AlertService(store, clock, { sealingKey, publicAppUrl: config.PUBLIC_APP_URL }, () =>
        deliveries.wake(),
      );
      // Feed items in batches (a roll-out of 1,000 enrollments/s keeps up); e-mails one at a time on a
      // consumer of their own, so that an SMTP outage never holds up the feed.
      await host.consume({
        consumer: 'notification',
        handleBatch: (batch) => events.handleFeedBatch(batch),
      });
      await host.consume({ consumer: NOTIFICATION_EMAIL_CONSUMER, handle: (event) => events.handle(event) });
      return [
        registerService(
          'notification.v1.NotificationService',
          NotificationServiceService,
          notificationGrpcHandlers(new NotificationService(store, clock), alerts),
          logger,
        ),
      ];
    },
  );
}
