import { billingEnvSchema } from '@sts/billing-infra/billing-config';
import { startBillingService } from '@sts/billing-infra/start-billing-service';
import { loadConfig } from '@sts/config/load-config';
import { createLogger } from '@sts/logger/create-logger';
import { Lifecycle } from '@sts/runtime/lifecycle';

async function main(): Promise<void> {
  const config = loadConfig(billingEnvSchema);
  const logger = createLogger('billing', config.LOG_LEVEL);
  const service = await startBillingService(config, logger);
  const lifecycle = new Lifecycle((name, error) => logger.error({ err: error, resource: name }, 'shutdown failed'));
  lifecycle.add('billing', () => service.stop());
  lifecycle.closeOnSignals();
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
