import { z } from 'zod';
import { commonEnv, grpcServerEnv, natsEnv, postgresEnv } from '@sts/config/env-fragments';

export const billingEnvSchema = z.object({
  ...commonEnv,
  ...postgresEnv,
  ...natsEnv,
  ...grpcServerEnv,
  GRPC_PORT: grpcServerEnv.GRPC_PORT.default(50053),
});

export type BillingConfig = z.infer<typeof billingEnvSchema>;
