import { loadConfig } from '@sts/config/load-config';
import { gatewayEnvSchema } from '@sts/gateway-http/gateway-config';
import { startGateway } from '@sts/gateway-http/start-gateway';
import { createLogger } from '@sts/logger/create-logger';
import { Lifecycle } from '@sts/runtime/lifecycle';

async function main(): Promise<void> {
  const config = loadConfig(gatewayEnvSchema);
  const logger = createLogger('gateway', config.LOG_LEVEL);
  const gateway = await startGateway(config, logger);
  logger.info({ url: gateway.url, docs: `${gateway.url}/docs` }, 'gateway listening');
  const lifecycle = new Lifecycle();
  lifecycle.add('gateway', () => gateway.stop());
  lifecycle.closeOnSignals();
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
