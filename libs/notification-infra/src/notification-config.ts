import { z } from 'zod';
import {
  commonEnv,
  grpcServerEnv,
  natsEnv,
  postgresEnv,
  publicUrlEnv,
  sealingEnv,
  smtpEnv,
} from '@sts/config/env-fragments';

export const notificationEnvSchema = z.object({
  ...commonEnv,
  ...postgresEnv,
  ...natsEnv,
  ...grpcServerEnv,
  GRPC_PORT: grpcServerEnv.GRPC_PORT.default(50052),
  ...smtpEnv,
  ...sealingEnv,
  ...publicUrlEnv,
});

export type NotificationConfig = z.infer<typeof notificationEnvSchema>;
