import { z } from 'zod';
import { commonEnv, oidcEnv, stripeEnv } from './env-fragments';
import { isLoopbackHost } from './https-in-production';
import { ConfigError, loadConfig } from './load-config';

/** The peers' URLs with NODE_ENV=production: https, or loopback http by ALLOW_LOOPBACK_HTTP=true only. */
describe('URLs of trusted peers with NODE_ENV=production', () => {
  const schema = z.object({ ...commonEnv, ...oidcEnv, ...stripeEnv });
  const base = { OIDC_ISSUER: 'https://idp.example.com/', OIDC_AUDIENCE: 'https://api.example.com' };
  const production = { ...base, NODE_ENV: 'production' };

  /** The configuration error's message, or undefined when the environment loads. */
  const refusal = (env: Record<string, string>, of: z.ZodObject = schema): string | undefined => {
    try {
      loadConfig(of, env);
      return undefined;
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as Error).message;
    }
  };

  it('takes https URLs, and Stripe by default', () => {
    const config = loadConfig(schema, { ...production, OIDC_JWKS_URL: 'https://keys.example.com/jwks' });
    expect(config).toMatchObject({ STRIPE_API_BASE: 'https://api.stripe.com', ALLOW_LOOPBACK_HTTP: false });
  });

  it.each(['OIDC_ISSUER', 'OIDC_JWKS_URL', 'STRIPE_API_BASE'])(
    'refuses %s over http to another host, naming it, even with ALLOW_LOOPBACK_HTTP=true',
    (name) => {
      for (const loopback of [{}, { ALLOW_LOOPBACK_HTTP: 'true' }] as Record<string, string>[]) {
        const message = refusal({ ...production, ...loopback, [name]: 'http://idp.example.com/' });
        expect(message).toBe(
          `Invalid configuration:\n  - ${name}: must be an https URL with NODE_ENV=production (http only for a loopback host, 127.0.0.0/8, ::1 or localhost, with ALLOW_LOOPBACK_HTTP=true)`,
        );
      }
    },
  );

  it('names every http URL in one error', () => {
    const message = refusal({
      ...production,
      OIDC_ISSUER: 'http://10.0.0.8:4400',
      OIDC_JWKS_URL: 'http://127.0.0.1:4400/jwks',
      STRIPE_API_BASE: 'http://stripe.internal',
    });
    expect(message?.split('\n')).toEqual([
      'Invalid configuration:',
      expect.stringMatching(/^ {2}- OIDC_ISSUER: must be an https URL/),
      '  - OIDC_JWKS_URL: http is refused with NODE_ENV=production; for a loopback host as this one set ALLOW_LOOPBACK_HTTP=true',
      expect.stringMatching(/^ {2}- STRIPE_API_BASE: must be an https URL/),
    ]);
  });

  it.each([
    'http://127.0.0.1:4400',
    'http://127.8.9.10/',
    'http://127.1:4400/', // URL reads it as 127.0.0.1
    'http://[::1]:4400/',
    'http://localhost:4400',
    'http://LOCALHOST/',
  ])('takes loopback http (%s) only with ALLOW_LOOPBACK_HTTP=true', (url) => {
    const env = { ...production, OIDC_ISSUER: url, STRIPE_API_BASE: url };
    expect(refusal(env)).toMatch(/OIDC_ISSUER: http is refused.*\n.*STRIPE_API_BASE: http is refused/);
    expect(refusal({ ...env, ALLOW_LOOPBACK_HTTP: 'false' })).toMatch(/OIDC_ISSUER: http is refused/);
    expect(loadConfig(schema, { ...env, ALLOW_LOOPBACK_HTTP: 'true' })).toMatchObject({
      OIDC_ISSUER: url,
      STRIPE_API_BASE: url,
      ALLOW_LOOPBACK_HTTP: true,
    });
  });

  it.each([
    'http://128.0.0.1/',
    'http://0.0.0.0/',
    'http://10.0.0.1/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::]/',
    'http://localhost.example.com/',
    'http://127.0.0.1.nip.io/',
    'http://sub.localhost/',
  ])('refuses http to %s, not loopback, with ALLOW_LOOPBACK_HTTP=true too', (url) => {
    expect(refusal({ ...production, ALLOW_LOOPBACK_HTTP: 'true', OIDC_ISSUER: url })).toMatch(
      /OIDC_ISSUER: must be an https URL/,
    );
  });

  it('takes http anywhere outside production', () => {
    for (const NODE_ENV of ['development', 'test']) {
      expect(
        loadConfig(schema, {
          ...base,
          NODE_ENV,
          OIDC_ISSUER: 'http://idp.example.com',
          STRIPE_API_BASE: 'http://10.0.0.5:12111',
        }),
      ).toMatchObject({ OIDC_ISSUER: 'http://idp.example.com', STRIPE_API_BASE: 'http://10.0.0.5:12111' });
    }
  });

  it('checks a variable that an app derives from the fragment (a default of its own)', () => {
    const derived = z.object({
      ...commonEnv,
      OIDC_ISSUER: oidcEnv.OIDC_ISSUER.default('http://idp.example.com'),
    });
    expect(refusal({ NODE_ENV: 'production' }, derived)).toMatch(/OIDC_ISSUER: must be an https URL/);
  });

  it('tells loopback hosts (as URL.hostname writes them) from the rest', () => {
    expect(['localhost', '127.0.0.1', '127.255.255.254', '[::1]'].map(isLoopbackHost)).toEqual([
      true,
      true,
      true,
      true,
    ]);
    expect(['::1', '[::ffff:7f00:1]', '126.0.0.1', 'localhost.', 'example.com'].map(isLoopbackHost)).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});
