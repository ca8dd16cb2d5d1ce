import { loadConfig } from '@sts/config/load-config';
import { identityEnvSchema } from '@sts/identity-infra/identity-config';
import { startIdentityService } from '@sts/identity-infra/start-identity-service';
import { createLogger } from '@sts/logger/create-logger';
import { Lifecycle } from '@sts/runtime/lifecycle';

async function main(): Promise<void> {
  const config = loadConfig(identityEnvSchema);
  const logger = createLogger('identity', config.LOG_LEVEL);
  const service = await startIdentityService(config, logger);
  const lifecycle = new Lifecycle();
  lifecycle.add('identity', () => service.stop());
  lifecycle.closeOnSignals();
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
