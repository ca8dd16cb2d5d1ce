import { ConfigError } from '@sts/config/load-config';
import { DevOidcProvider } from '@sts/dev-oidc/dev-oidc-provider';
import { createLogger } from '@sts/logger/create-logger';
import { loadDevIdpConfig, PRODUCTION_REFUSAL } from './dev-idp-config';

/** Development identity provider: discovery, JWKS and client credentials for local runs. */
async function main(): Promise<void> {
  if (process.env['NODE_ENV'] === 'production') {
    createLogger('dev-idp').fatal(PRODUCTION_REFUSAL);
    process.exit(1);
  }
  let config;
  try {
    config = loadDevIdpConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    createLogger('dev-idp').fatal(error.message);
    process.exit(1);
  }
  const log = createLogger('dev-idp', config.logLevel);

  const provider = await DevOidcProvider.create({
    issuer: config.issuer,
    audience: config.audience,
    keyFile: config.keyFile,
    clientsFile: config.clientsFile,
  });
  await provider.start(config.port, config.host);
  log.info(
    {
      issuer: provider.issuer,
      audience: provider.audience,
      jwks_uri: provider.jwksUri,
      token_endpoint: provider.tokenEndpoint,
      kid: provider.kid,
      keyFile: config.keyFile,
      clientsFile: config.clientsFile,
    },
    `dev-idp listening on ${provider.url}; get tokens with "npm run token -- --help"`,
  );

  const shutdown = (signal: NodeJS.Signals) => {
    log.info({ signal }, 'dev-idp stopping');
    provider.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, 'dev-idp failed to stop cleanly');
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

main().catch((error: unknown) => {
  createLogger('dev-idp').fatal({ err: error }, 'dev-idp failed to start');
  process.exit(1);
});
