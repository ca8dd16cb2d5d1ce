import { loadConfig } from '@sts/config/load-config';
import { enrollmentEnvSchema } from '@sts/enrollment-infra/enrollment-config';
import { startEnrollmentService } from '@sts/enrollment-infra/start-enrollment-service';
import { createLogger } from '@sts/logger/create-logger';
import { Lifecycle } from '@sts/runtime/lifecycle';

async function main(): Promise<void> {
  const config = loadConfig(enrollmentEnvSchema);
  const logger = createLogger('enrollment', config.LOG_LEVEL);
  const service = await startEnrollmentService(config, logger);
  const lifecycle = new Lifecycle();
  lifecycle.add('enrollment', () => service.stop());
  lifecycle.closeOnSignals();
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
