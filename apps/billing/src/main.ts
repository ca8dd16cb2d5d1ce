import { loadConfig } from '@sts/config/load-config';
import { createLogger } from '@sts/logger/create-logger';
import { runProcess } from '@sts/runtime/lifecycle';
import { billingEnvSchema } from '@sts/billing-infra/billing-config';
import { startBillingService } from '@sts/billing-infra/start-billing-service';

runProcess('billing', async () => {
  const config = loadConfig(billingEnvSchema);
  const logger = createLogger('billing', config.LOG_LEVEL);
  const service = await startBillingService(config, logger);
  return { logger, stop: () => service.stop(), finished: service.migratedOnly };
});
