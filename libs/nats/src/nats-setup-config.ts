import { z } from 'zod';
import { commonEnv, natsEnv, telemetryStreamEnv } from '@sts/config/env-fragments';

/**
 * nats-setup's configuration: NATS_URL names the admin user; the telemetry settings are the analytics
 * service's (the stream and its consumer carry them).
 */
export const natsSetupEnvSchema = z.object({
  ...commonEnv,
  ...natsEnv,
  ...telemetryStreamEnv,
});
