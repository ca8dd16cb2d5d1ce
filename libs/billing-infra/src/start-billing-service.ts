import { BillingEventHandler } from '@sts/billing-domain/billing-events';
import { BillingService } from '@sts/billing-domain/billing-service';
import { PaymentEventHandler } from '@sts/billing-domain/payment-events';
import { registerService } from '@sts/grpc/grpc-server';
import type { Logger } from '@sts/logger/create-logger';
import { BillingServiceService } from '@sts/proto/gen/billing/v1/billing';
import { runServiceHost, type RunningService } from '@sts/service-host/service-host';
import type { BillingConfig } from './billing-config';
import { BILLING_ENTITIES } from './billing-entities';
import { billingGrpcHandlers } from './billing-grpc-handlers';
import { BILLING_MIGRATIONS, BILLING_SCHEMA, PAYMENT_EVENTS_RETENTION } from './billing-migrations';
import { PostgresBillingStore } from './postgres-billing-store';
import { createStripeClient, StripePaymentProvider } from './stripe-payment-provider';

export type { RunningService } from '@sts/service-host/service-host';

/** Durable JetStream consumer of this service. */
export const BILLING_CONSUMER = 'billing';

/**
 * Billing: the license of each organization (initial one on `org.created`), checkout and portal
 * through Stripe, and Stripe's payment events. Without STRIPE_SECRET_KEY the payment calls answer
 * BILLING_NOT_CONFIGURED and licenses stay as they are.
 */
export function startBillingService(config: BillingConfig, logger: Logger): Promise<RunningService> {
  return runServiceHost(
    {
      name: BILLING_CONSUMER,
      database: {
        schema: BILLING_SCHEMA,
        entities: BILLING_ENTITIES,
        migrations: BILLING_MIGRATIONS,
        publishesEvents: true,
        retainedTables: [PAYMENT_EVENTS_RETENTION],
      },
      config,
      logger,
    },
    async (host) => {
      const store = new PostgresBillingStore(host.orm, () => host.wakeOutbox());
      const clock = { now: () => new Date() };
      const stripe = createStripeClient(config);
      if (!stripe)
        logger.warn('STRIPE_SECRET_KEY is not set: checkout, portal and payment events answer 503');
      const provider = stripe
        ? new StripePaymentProvider(stripe, config.STRIPE_WEBHOOK_SECRET, logger)
        : null;
      const events = new BillingEventHandler(store);
      await host.consume({
        consumer: BILLING_CONSUMER,
        handle: (event) => events.handle(event),
      });
      return [
        registerService(
          'billing.v1.BillingService',
          BillingServiceService,
          billingGrpcHandlers(
            new BillingService(store, clock, provider, { publicAppUrl: config.PUBLIC_APP_URL }),
            new PaymentEventHandler(store, provider, clock),
            logger,
          ),
          logger,
        ),
      ];
    },
  );
}
