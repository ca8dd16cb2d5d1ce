import { loadConfig } from '@sts/config/load-config';
import { gatewayEnvSchema } from '@sts/gateway-http/gateway-config';
import { startGateway } from '@sts/gateway-http/start-gateway';
import { createLogger } from '@sts/logger/create-logger';
import { runProcess } from '@sts/runtime/lifecycle';

runProcess('gateway', async () => {
  const config = loadConfig(gatewayEnvSchema);
  const logger = createLogger('gateway', config.LOG_LEVEL);
  const gateway = await startGateway(config, logger);
  logger.info({ url: gateway.url, docs: `${gateway.url}/docs` }, 'gateway listening');
  return { logger, stop: () => gateway.stop() };
});
