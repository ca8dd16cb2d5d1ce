import { createServiceOrm, migrateToLatest } from '@sts/db/service-orm';
import { registerService, startGrpcServer } from '@sts/grpc/grpc-server';
import type { Logger } from '@sts/logger/create-logger';
import { startEventConsumer } from '@sts/nats/event-consumer';
import { ensureEventsStream } from '@sts/nats/event-stream';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { NOTIFICATION_EVENT_TYPES, NotificationEventHandler } from '@sts/notification-domain/notification-events';
import { NotificationService } from '@sts/notification-domain/notification-service';
import { NotificationServiceService } from '@sts/proto/gen/notification/v1/notification';
import { Lifecycle } from '@sts/runtime/lifecycle';
import { MikroNotificationStore } from './mikro-notification-store';
import type { NotificationConfig } from './notification-config';
import { NOTIFICATION_ENTITIES } from './notification-entities';
import { notificationGrpcHandlers } from './notification-grpc-handlers';
import { NOTIFICATION_MIGRATIONS, NOTIFICATION_SCHEMA } from './notification-migrations';
import { createSmtpMailer } from './smtp-mailer';

export interface RunningService {
  grpcPort: number;
  stop(): Promise<void>;
}

/** Durable JetStream consumer of this service. */
export const NOTIFICATION_CONSUMER = 'notification';

/**
 * Starts the notification service: PostgreSQL (schema `notification`, migrated), the SMTP mailer,
 * the event consumer (feed items and e-mails) and the gRPC server. `stop()` closes them in reverse.
 */
export async function startNotificationService(config: NotificationConfig, logger: Logger): Promise<RunningService> {
  const lifecycle = new Lifecycle((name, error) => logger.error({ err: error, resource: name }, 'shutdown step failed'));
  try {
    const orm = await createServiceOrm({
      databaseUrl: config.DATABASE_URL,
      schema: NOTIFICATION_SCHEMA,
      entities: NOTIFICATION_ENTITIES,
      migrations: NOTIFICATION_MIGRATIONS,
      logger,
    });
    lifecycle.add('postgres', () => orm.close());
    await migrateToLatest(orm, logger);

    const mailer = createSmtpMailer({ url: config.SMTP_URL, from: config.MAIL_FROM, logger });
    lifecycle.add('smtp', () => mailer.close());

    const nats = await connectJetStream({ url: config.NATS_URL, name: 'notification', logger });
    lifecycle.add('nats', () => nats.close());
    await ensureEventsStream(nats.jsm, config.NATS_NAMESPACE);

    const store = new MikroNotificationStore(orm);
    const clock = { now: () => new Date() };
    const events = new NotificationEventHandler(store, mailer, clock, {
      sealingKey: Buffer.from(config.SECRET_SEALING_KEY, 'base64'),
      publicAppUrl: config.PUBLIC_APP_URL,
    });
    const consumer = await startEventConsumer({
      js: nats.js,
      jsm: nats.jsm,
      namespace: config.NATS_NAMESPACE,
      durableName: NOTIFICATION_CONSUMER,
      eventTypes: NOTIFICATION_EVENT_TYPES,
      handle: async (event) => {
        const outcome = await events.handle(event);
        logger.info({ event_id: event.id, event_type: event.type, outcome }, 'event handled');
      },
      logger,
      // Retries back off to 5 minutes apart: 100 deliveries ride out an SMTP outage of about 8 hours
      // before an invitation e-mail is given up (and logged).
      maxDeliver: 100,
    });
    lifecycle.add('event consumer', () => consumer.stop());

    const server = await startGrpcServer({
      host: config.GRPC_HOST,
      port: config.GRPC_PORT,
      logger,
      services: [
        registerService(
          'notification.v1.NotificationService',
          NotificationServiceService,
          notificationGrpcHandlers(new NotificationService(store, clock)),
          logger,
        ),
      ],
    });
    lifecycle.add('grpc server', () => server.shutdown());
    return { grpcPort: server.port, stop: () => lifecycle.close() };
  } catch (error) {
    await lifecycle.close();
    throw error;
  }
}
