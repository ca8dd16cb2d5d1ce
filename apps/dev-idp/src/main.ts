import { DevOidcProvider } from '@sts/dev-oidc/dev-oidc-provider';
import { createLogger } from '@sts/logger/create-logger';
import { runProcess } from '@sts/runtime/lifecycle';
import { loadDevIdpConfig } from './dev-idp-config';

/** Development identity provider for local runs: discovery, JWKS, client credentials, the dashboard's sign-in. */
runProcess('dev-idp', async () => {
  const config = loadDevIdpConfig(); // refuses NODE_ENV=production
  const log = createLogger('dev-idp', config.logLevel);

  const provider = await DevOidcProvider.create({
    issuer: config.issuer,
    audience: config.audience,
    keyFile: config.keyFile,
    clientsFile: config.clientsFile,
    publicClients: [config.dashboardClient],
  });
  await provider.start(config.port, config.host);
  log.info(
    {
      issuer: provider.issuer,
      audience: provider.audience,
      jwks_uri: provider.jwksUri,
      token_endpoint: provider.tokenEndpoint,
      authorization_endpoint: provider.authorizationEndpoint,
      dashboard_client_id: config.dashboardClient.clientId,
      dashboard_redirect_uris: config.dashboardClient.redirectUris,
      kid: provider.kid,
      keyFile: config.keyFile,
      clientsFile: config.clientsFile,
    },
    `dev-idp listening on ${provider.url}; get tokens with "npm run token -- --help"`,
  );
  return { logger: log, stop: () => provider.stop() };
});
