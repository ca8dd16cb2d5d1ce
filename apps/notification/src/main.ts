import { loadConfig } from '@sts/config/load-config';
import { createLogger } from '@sts/logger/create-logger';
import { notificationEnvSchema } from '@sts/notification-infra/notification-config';
import { startNotificationService } from '@sts/notification-infra/start-notification-service';
import { Lifecycle } from '@sts/runtime/lifecycle';

async function main(): Promise<void> {
  const config = loadConfig(notificationEnvSchema);
  const logger = createLogger('notification', config.LOG_LEVEL);
  const service = await startNotificationService(config, logger);
  const lifecycle = new Lifecycle((name, error) => logger.error({ err: error, resource: name }, 'shutdown failed'));
  lifecycle.add('notification', () => service.stop());
  lifecycle.closeOnSignals();
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
