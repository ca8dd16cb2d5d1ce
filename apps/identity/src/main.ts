import { loadConfig } from '@sts/config/load-config';
import { createLogger } from '@sts/logger/create-logger';
import { runProcess } from '@sts/runtime/lifecycle';
import { identityEnvSchema } from '@sts/identity-infra/identity-config';
import { startIdentityService } from '@sts/identity-infra/start-identity-service';

runProcess('identity', async () => {
  const config = loadConfig(identityEnvSchema);
  const logger = createLogger('identity', config.LOG_LEVEL);
  const service = await startIdentityService(config, logger);
  return { logger, stop: () => service.stop(), finished: service.migratedOnly };
});
