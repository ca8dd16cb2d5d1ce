import { z } from 'zod';
import { commonEnv, grpcServerEnv, natsEnv, postgresEnv, sealingEnv } from '@sts/config/env-fragments';

export const enrollmentEnvSchema = z.object({
  ...commonEnv,
  ...postgresEnv,
  ...natsEnv,
  ...sealingEnv,
  ...grpcServerEnv,
  GRPC_PORT: grpcServerEnv.GRPC_PORT.default(50054),
  /**
   * The most unused, unexpired enrollment codes an organization may hold at once; beyond it, making codes
   * is 400 ENROLLMENT_CODE_LIMIT. Bounds what one sign-in can store (codes are kept 7 days past expiry).
   */
  ENROLLMENT_MAX_LIVE_CODES: z.coerce.number().int().min(100).max(1_000_000).default(10_000),
  /** How long telemetry sightings gather before one write moves the devices' last_seen_at. */
  LAST_SEEN_FLUSH_MS: z.coerce.number().int().min(10).max(60_000).default(10_000),
  /**
   * 32-byte key (base64) the enrollment service alone holds. Keys derived from it (HKDF) encrypt
   * enrollment keys at rest and key the HMAC of enrollment codes. Losing it makes stored keys
   * unreadable (rotate them) and live codes unusable (make new ones).
   */
  ENROLLMENT_KEY_ENCRYPTION_KEY: z
    .string()
    .refine((value) => Buffer.from(value, 'base64').length === 32, 'must be 32 bytes, base64-encoded'),
});

export type EnrollmentConfig = z.infer<typeof enrollmentEnvSchema>;
