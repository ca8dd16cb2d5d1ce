import { createLogger } from '@sts/logger/create-logger';
import { loggedLifecycle, runProcess } from '@sts/runtime/lifecycle';
import { startStripeWithHostedPages } from '@sts/stand-ins/stripe-hosted-pages';
import { loadDevStripeConfig } from './dev-stripe-config';

/**
 * Development Stripe: the Stripe stand-in's API on DEV_STRIPE_PORT for billing (STRIPE_API_BASE), with the
 * Checkout and portal pages a browser is sent to; paying or cancelling there sends the signed webhook event
 * to DEV_STRIPE_WEBHOOK_URL.
 */
runProcess('dev-stripe', async () => {
  const config = loadDevStripeConfig(); // refuses NODE_ENV=production
  const log = createLogger('dev-stripe', config.LOG_LEVEL);
  const lifecycle = loggedLifecycle(log);

  const stripe = await startStripeWithHostedPages({
    host: config.DEV_STRIPE_HOST,
    port: config.DEV_STRIPE_PORT,
    ...(config.DEV_STRIPE_PUBLIC_URL ? { publicUrl: config.DEV_STRIPE_PUBLIC_URL } : {}),
    apiKey: config.STRIPE_SECRET_KEY,
    webhook: { url: config.DEV_STRIPE_WEBHOOK_URL, secret: config.STRIPE_WEBHOOK_SECRET },
    log,
  });
  lifecycle.add('http', () => stripe.close());

  log.info(
    {
      url: stripe.standIn.url,
      webhook: config.DEV_STRIPE_WEBHOOK_URL,
      prices: [...stripe.standIn.prices.values()].map((price) => price.lookup_key),
    },
    `dev-stripe answering the Stripe API at ${stripe.standIn.url}; events go to ${config.DEV_STRIPE_WEBHOOK_URL}`,
  );
  return { logger: log, stop: () => lifecycle.close() };
});
