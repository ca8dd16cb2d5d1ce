import { loadConfig } from '@sts/config/load-config';
import { createLogger } from '@sts/logger/create-logger';
import { runProcess } from '@sts/runtime/lifecycle';
import { enrollmentEnvSchema } from '@sts/enrollment-infra/enrollment-config';
import { startEnrollmentService } from '@sts/enrollment-infra/start-enrollment-service';

runProcess('enrollment', async () => {
  const config = loadConfig(enrollmentEnvSchema);
  const logger = createLogger('enrollment', config.LOG_LEVEL);
  const service = await startEnrollmentService(config, logger);
  return { logger, stop: () => service.stop(), finished: service.migratedOnly };
});
