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
  /**
   * Where agents reach the API (the gateway's public address): the `--server` of the enroll command
   * in enrollment e-mails. Same rules as PUBLIC_APP_URL (http or https).
   */
  PUBLIC_API_URL: publicUrlEnv.PUBLIC_APP_URL.unwrap().default('http://localhost:8080'),
});

export type NotificationConfig = z.infer<typeof notificationEnvSchema>;
