import { commonEnv, stripeEnv } from '@sts/config/env-fragments';
import { loadConfig } from '@sts/config/load-config';
import { z } from 'zod';

const port = z.coerce.number().int().min(0).max(65535);

export const PRODUCTION_REFUSAL =
  'dev-stripe is a development stand-in for Stripe and refuses to run with NODE_ENV=production; ' +
  'set STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET of a real Stripe account instead.';

export const devStripeEnvSchema = z.object({
  ...commonEnv,
  NODE_ENV: commonEnv.NODE_ENV.refine((value) => value !== 'production', PRODUCTION_REFUSAL),
  /** Interface it listens on; 0.0.0.0 inside a container. */
  DEV_STRIPE_HOST: z.string().min(1).default('127.0.0.1'),
  DEV_STRIPE_PORT: port.default(12111),
  /** Base of the Checkout and portal URLs it hands out; default `http://<host>:<port>`. */
  DEV_STRIPE_PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** Where it sends the signed webhook events (the gateway's endpoint). */
  DEV_STRIPE_WEBHOOK_URL: z
    .url({ protocol: /^https?$/ })
    .default('http://localhost:8080/api/billing/webhook'),
  /** The API key requests must carry: billing's STRIPE_SECRET_KEY. */
  STRIPE_SECRET_KEY: stripeEnv.STRIPE_SECRET_KEY.unwrap(),
  /** Signs the webhook events: the gateway's and billing's STRIPE_WEBHOOK_SECRET. */
  STRIPE_WEBHOOK_SECRET: stripeEnv.STRIPE_WEBHOOK_SECRET.unwrap(),
});

export type DevStripeConfig = z.infer<typeof devStripeEnvSchema>;

/** The development Stripe's configuration; with NODE_ENV=production a ConfigError that says why it does not run. */
export function loadDevStripeConfig(env: Record<string, string | undefined> = process.env): DevStripeConfig {
  return loadConfig(devStripeEnvSchema, env);
}
