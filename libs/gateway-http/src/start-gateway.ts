import { AccessTokenVerifier, accessTokenVerifierOptionsFromEnv } from '@sts/auth/access-token-verifier';
import type { Logger } from '@sts/logger/create-logger';
import { buildGateway } from './build-gateway';
import type { GatewayConfig } from './gateway-config';
import { GatewayCaches } from './gateway-caches';
import { subscribeToMembershipChanges } from './membership-invalidation';
import { createUpstreamClients } from './upstream-clients';
import { connectJetStream } from '@sts/nats/jetstream-connection';

export interface RunningGateway {
  port: number;
  url: string;
  stop(): Promise<void>;
}

export async function startGateway(config: GatewayConfig, logger: Logger): Promise<RunningGateway> {
  const clients = createUpstreamClients(config);
  const verifier = new AccessTokenVerifier(accessTokenVerifierOptionsFromEnv(config));
  const caches = new GatewayCaches(config);
  const nats = await connectJetStream({ url: config.NATS_URL, name: 'gateway', logger });
  const subscriptions = subscribeToMembershipChanges(nats.nc, config.NATS_NAMESPACE, caches, logger);
  const app = await buildGateway({ config, logger, clients, verifier, caches });
  await app.listen({ host: config.HOST, port: config.PORT });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.PORT;
  return {
    port,
    url: `http://${config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST}:${port}`,
    stop: async () => {
      await app.close();
      for (const subscription of subscriptions) subscription.unsubscribe();
      await nats.close();
      clients.close();
    },
  };
}
