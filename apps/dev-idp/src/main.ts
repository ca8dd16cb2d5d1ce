import { DevOidcProvider } from '@sts/dev-oidc/dev-oidc-provider';
import { createLogger } from '@sts/logger/create-logger';
import { runProcess } from '@sts/runtime/lifecycle';
import { loadDevIdpConfig, PRODUCTION_REFUSAL } from './dev-idp-config';

/** Development identity provider: discovery, JWKS and client credentials for local runs. */
runProcess('dev-idp', async () => {
  if (process.env['NODE_ENV'] === 'production') throw new Error(PRODUCTION_REFUSAL);
  const config = loadDevIdpConfig();
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
  return { logger: log, stop: () => provider.stop() };
});
