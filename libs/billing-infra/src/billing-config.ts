import { z } from 'zod';
import {
  commonEnv,
  grpcServerEnv,
  natsEnv,
  postgresEnv,
  publicUrlEnv,
  stripeEnv,
} from '@sts/config/env-fragments';

export const billingEnvSchema = z.object({
  ...commonEnv,
  ...postgresEnv,
  ...natsEnv,
  ...grpcServerEnv,
  ...publicUrlEnv,
  ...stripeEnv,
  GRPC_PORT: grpcServerEnv.GRPC_PORT.default(50053),
});

export type BillingConfig = z.infer<typeof billingEnvSchema>;
