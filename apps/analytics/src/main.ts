import { z } from 'zod';
import { loadConfig } from '@sts/config/load-config';
import { loadTestOptions } from '@sts/config/test-options';
import { createLogger } from '@sts/logger/create-logger';
import { runProcess } from '@sts/runtime/lifecycle';
import { analyticsEnvSchema } from '@sts/analytics-infra/analytics-config';
import { startAnalyticsService } from '@sts/analytics-infra/start-analytics-service';

runProcess('analytics', async () => {
  const config = loadConfig(analyticsEnvSchema);
  // Failure tests only (STS_TEST_OPTIONS, refused in production): die the hard way after a batch is
  // stored and before it is acknowledged.
  const testOptions = loadTestOptions({ killAfterIngest: z.boolean().optional() });
  const logger = createLogger('analytics', config.LOG_LEVEL);
  const service = await startAnalyticsService(config, logger, {
    afterIngest: testOptions.killAfterIngest
      ? (outcome) => {
          if (outcome.stored > 0) process.kill(process.pid, 'SIGKILL');
        }
      : undefined,
  });
  return { logger, stop: () => service.stop(), finished: service.migratedOnly };
});
