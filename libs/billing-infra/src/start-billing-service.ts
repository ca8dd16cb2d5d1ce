import { BILLING_EVENT_TYPES, BillingEventHandler } from '@sts/billing-domain/billing-events';
import { BillingService } from '@sts/billing-domain/billing-service';
import { registerService } from '@sts/grpc/grpc-server';
import type { Logger } from '@sts/logger/create-logger';
import { BillingServiceService } from '@sts/proto/gen/billing/v1/billing';
import { runServiceHost, type RunningService } from '@sts/service-host/service-host';
import type { BillingConfig } from './billing-config';
import { BILLING_ENTITIES } from './billing-entities';
import { billingGrpcHandlers } from './billing-grpc-handlers';
import { BILLING_MIGRATIONS, BILLING_SCHEMA } from './billing-migrations';
import { MikroBillingStore } from './mikro-billing-store';

export type { RunningService } from '@sts/service-host/service-host';

/** Durable JetStream consumer of this service. */
export const BILLING_CONSUMER = 'billing';

/** Billing: the license of each organization (initial one on `org.created`). */
export function startBillingService(config: BillingConfig, logger: Logger): Promise<RunningService> {
  return runServiceHost(
    {
      name: BILLING_CONSUMER,
      database: {
        schema: BILLING_SCHEMA,
        entities: BILLING_ENTITIES,
        migrations: BILLING_MIGRATIONS,
        publishesEvents: false,
      },
      config,
      logger,
    },
    async (host) => {
      const store = new MikroBillingStore(host.orm);
      const events = new BillingEventHandler(store);
      await host.consume({
        eventTypes: BILLING_EVENT_TYPES,
        handle: (event) => events.handle(event),
      });
      return [
        registerService(
          'billing.v1.BillingService',
          BillingServiceService,
          billingGrpcHandlers(new BillingService(store, { now: () => new Date() })),
          logger,
        ),
      ];
    },
  );
}
