import { ConfigError } from '@sts/config/load-config';
import { DevOidcProvider } from '@sts/dev-oidc/dev-oidc-provider';
import { developmentProviderRefusal } from './start-gateway';

/** The production gateway's start against the development identity provider, over HTTP. */
describe('a production gateway pointed at the development identity provider', () => {
  const audience = 'https://api.refusal.test';
  let development: DevOidcProvider;
  let playingReal: DevOidcProvider;

  beforeAll(async () => {
    development = await DevOidcProvider.create({ audience });
    await development.start();
    playingReal = await DevOidcProvider.create({ audience, announceDevelopment: false });
    await playingReal.start();
  });

  afterAll(async () => {
    await development?.stop();
    await playingReal?.stop();
  });

  it('refuses to start, naming the variable that points there', async () => {
    const byIssuer = await developmentProviderRefusal({
      NODE_ENV: 'production',
      OIDC_ISSUER: development.issuer,
    });
    expect(byIssuer).toBeInstanceOf(ConfigError);
    expect(byIssuer?.message).toBe(
      `Invalid configuration:\n  - OIDC_ISSUER: ${development.jwksUri} is the development identity provider's key set (dev-idp signs in anyone as anyone); refused with NODE_ENV=production`,
    );
    const byKeys = await developmentProviderRefusal({
      NODE_ENV: 'production',
      OIDC_ISSUER: 'https://login.example.com/',
      OIDC_JWKS_URL: development.jwksUri,
    });
    expect(byKeys?.message).toMatch(
      /^Invalid configuration:\n {2}- OIDC_JWKS_URL: .* development identity provider/,
    );
  });

  it('starts outside production, against a provider that does not say it is the development one, and without an answer', async () => {
    for (const NODE_ENV of ['development', 'test'] as const)
      expect(await developmentProviderRefusal({ NODE_ENV, OIDC_ISSUER: development.issuer })).toBeUndefined();
    expect(
      await developmentProviderRefusal({ NODE_ENV: 'production', OIDC_ISSUER: playingReal.issuer }),
    ).toBeUndefined();
    const gone = await DevOidcProvider.create({ audience });
    await gone.start();
    const issuer = gone.issuer;
    await gone.stop();
    expect(
      await developmentProviderRefusal({ NODE_ENV: 'production', OIDC_ISSUER: issuer }, 1_000),
    ).toBeUndefined();
  });
});
