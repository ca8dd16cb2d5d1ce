import { loadConfig } from '@sts/config/load-config';
import { createLogger } from '@sts/logger/create-logger';
import { runProcess } from '@sts/runtime/lifecycle';
import { notificationEnvSchema } from '@sts/notification-infra/notification-config';
import { startNotificationService } from '@sts/notification-infra/start-notification-service';

runProcess('notification', async () => {
  const config = loadConfig(notificationEnvSchema);
  const logger = createLogger('notification', config.LOG_LEVEL);
  const service = await startNotificationService(config, logger);
  return { logger, stop: () => service.stop(), finished: service.migratedOnly };
});
