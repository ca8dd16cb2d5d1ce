import { ConfigError } from '@sts/config/load-config';
import { loadDevStripeConfig, PRODUCTION_REFUSAL } from './dev-stripe-config';

const keys = { STRIPE_SECRET_KEY: 'sk_test_dev_0123abcd', STRIPE_WEBHOOK_SECRET: 'whsec_dev0123' };

describe("the development Stripe's configuration", () => {
  it('has defaults, and takes a blank variable as unset', () => {
    expect(loadDevStripeConfig({ ...keys, DEV_STRIPE_PORT: ' ' })).toMatchObject({
      DEV_STRIPE_HOST: '127.0.0.1',
      DEV_STRIPE_PORT: 12111,
      DEV_STRIPE_WEBHOOK_URL: 'http://localhost:8080/api/billing/webhook',
      ...keys,
    });
    expect(loadDevStripeConfig(keys).DEV_STRIPE_PUBLIC_URL).toBeUndefined();
  });

  it('needs the API key it accepts and the secret it signs with, each in Stripe’s shape', () => {
    expect(() => loadDevStripeConfig({ STRIPE_WEBHOOK_SECRET: keys.STRIPE_WEBHOOK_SECRET })).toThrow(
      /STRIPE_SECRET_KEY/,
    );
    expect(() => loadDevStripeConfig({ STRIPE_SECRET_KEY: keys.STRIPE_SECRET_KEY })).toThrow(
      /STRIPE_WEBHOOK_SECRET/,
    );
    expect(() => loadDevStripeConfig({ ...keys, STRIPE_SECRET_KEY: 'pk_test_1' })).toThrow(ConfigError);
    expect(() => loadDevStripeConfig({ ...keys, DEV_STRIPE_WEBHOOK_URL: 'ftp://x/hook' })).toThrow(
      /DEV_STRIPE_WEBHOOK_URL/,
    );
  });

  it('refuses NODE_ENV=production as a configuration error that says why', () => {
    expect(() => loadDevStripeConfig({ ...keys, NODE_ENV: 'production' })).toThrow(ConfigError);
    expect(() => loadDevStripeConfig({ ...keys, NODE_ENV: 'production' })).toThrow(PRODUCTION_REFUSAL);
    expect(loadDevStripeConfig({ ...keys, NODE_ENV: 'development' }).NODE_ENV).toBe('development');
  });
});
