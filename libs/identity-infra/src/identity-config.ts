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
  /**
   * E-mails to people outside the organization (invites and e-mailed enrollment codes together) that one
   * organization may have us send per UTC day; then 429 with nothing sent.
   */
  OUTBOUND_EMAILS_PER_ORG_PER_DAY: z.coerce.number().int().min(1).default(50),
  /** Of those, how many may go to one recipient per UTC day. */
  OUTBOUND_EMAILS_PER_RECIPIENT_PER_DAY: z.coerce.number().int().min(1).default(3),
  /**
   * How many may go to one recipient per UTC day from all organizations together: anyone who signs in
   * gets an organization, so the limit above alone lets K accounts send 3·K e-mails a day to one victim.
   */
  OUTBOUND_EMAILS_PER_RECIPIENT_ALL_ORGS_PER_DAY: z.coerce.number().int().min(1).default(10),
});

export type IdentityConfig = z.infer<typeof identityEnvSchema>;
