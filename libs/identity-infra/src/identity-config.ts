import { z } from 'zod';
import { commonEnv, grpcServerEnv, natsEnv, postgresEnv, sealingEnv } from '@sts/config/env-fragments';

export const identityEnvSchema = z.object({
  ...commonEnv,
  ...postgresEnv,
  ...natsEnv,
  ...sealingEnv,
  ...grpcServerEnv,
  GRPC_PORT: grpcServerEnv.GRPC_PORT.default(50051),
  /** How long an invite can be accepted. */
  INVITE_TTL_HOURS: z.coerce
    .number()
    .int()
    .min(1)
    .max(24 * 30)
    .default(24 * 7),
  /** Invites one organization may send per UTC day. */
  INVITES_PER_ORG_PER_DAY: z.coerce.number().int().min(1).default(100),
});

export type IdentityConfig = z.infer<typeof identityEnvSchema>;
