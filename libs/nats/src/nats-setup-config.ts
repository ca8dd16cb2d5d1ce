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
  /** Copies of every stream and bucket a NATS cluster keeps (1 on a single server). */
  NATS_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
});
