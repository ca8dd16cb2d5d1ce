import { BILLING_EVENT_TYPES, BillingEventHandler } from '@sts/billing-domain/billing-events';
import { BillingService } from '@sts/billing-domain/billing-service';
import { createServiceOrm, migrateToLatest } from '@sts/db/service-orm';
import { registerService, startGrpcServer } from '@sts/grpc/grpc-server';
import type { Logger } from '@sts/logger/create-logger';
import { startEventConsumer } from '@sts/nats/event-consumer';
import { ensureEventsStream } from '@sts/nats/event-stream';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { BillingServiceService } from '@sts/proto/gen/billing/v1/billing';
import { Lifecycle } from '@sts/runtime/lifecycle';
import type { BillingConfig } from './billing-config';
import { BILLING_ENTITIES } from './billing-entities';
import { billingGrpcHandlers } from './billing-grpc-handlers';
import { BILLING_MIGRATIONS, BILLING_SCHEMA } from './billing-migrations';
import { MikroBillingStore } from './mikro-billing-store';

export interface RunningService {
  grpcPort: number;
  stop(): Promise<void>;
}

/** Durable JetStream consumer of this service. */
export const BILLING_CONSUMER = 'billing';

/**
 * Starts the billing service: PostgreSQL (schema `billing`, migrated), the event consumer
 * (`org.created` → initial license) and the gRPC server. `stop()` closes them in reverse.
 */
export async function startBillingService(config: BillingConfig, logger: Logger): Promise<RunningService> {
  const lifecycle = new Lifecycle((name, error) => logger.error({ err: error, resource: name }, 'shutdown step failed'));
  try {
    const orm = await createServiceOrm({
      databaseUrl: config.DATABASE_URL,
      schema: BILLING_SCHEMA,
      entities: BILLING_ENTITIES,
      migrations: BILLING_MIGRATIONS,
      logger,
    });
    lifecycle.add('postgres', () => orm.close());
    await migrateToLatest(orm, logger);

    const nats = await connectJetStream({ url: config.NATS_URL, name: 'billing', logger });
    lifecycle.add('nats', () => nats.close());
    await ensureEventsStream(nats.jsm, config.NATS_NAMESPACE);

    const store = new MikroBillingStore(orm);
    const events = new BillingEventHandler(store);
    const consumer = await startEventConsumer({
      js: nats.js,
      jsm: nats.jsm,
      namespace: config.NATS_NAMESPACE,
      durableName: BILLING_CONSUMER,
      eventTypes: BILLING_EVENT_TYPES,
      handle: async (event) => {
        const outcome = await events.handle(event);
        logger.info({ event_id: event.id, event_type: event.type, outcome }, 'event handled');
      },
      logger,
    });
    lifecycle.add('event consumer', () => consumer.stop());

    const server = await startGrpcServer({
      host: config.GRPC_HOST,
      port: config.GRPC_PORT,
      logger,
      services: [
        registerService(
          'billing.v1.BillingService',
          BillingServiceService,
          billingGrpcHandlers(new BillingService(store, { now: () => new Date() })),
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
