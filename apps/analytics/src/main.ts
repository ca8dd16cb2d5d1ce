import { loadConfig } from '@sts/config/load-config';
import { createLogger } from '@sts/logger/create-logger';
import { runProcess } from '@sts/runtime/lifecycle';
import { analyticsEnvSchema } from '@sts/analytics-infra/analytics-config';
import { startAnalyticsService } from '@sts/analytics-infra/start-analytics-service';

runProcess('analytics', async () => {
  const config = loadConfig(analyticsEnvSchema);
  const logger = createLogger('analytics', config.LOG_LEVEL);
  const service = await startAnalyticsService(config, logger, {
    // Failure tests only: die the hard way after a batch is stored and before it is acknowledged.
    afterIngest:
      config.NODE_ENV !== 'production' && process.env.ANALYTICS_TEST_KILL_AFTER_INGEST === '1'
        ? (outcome) => {
            if (outcome.stored > 0) process.kill(process.pid, 'SIGKILL');
          }
        : undefined,
  });
  return { logger, stop: () => service.stop(), finished: service.migratedOnly };
});
