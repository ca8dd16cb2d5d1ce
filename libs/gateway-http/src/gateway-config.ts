import { z } from 'zod';
import { commonEnv, grpcClientsEnv, oidcEnv } from '@sts/config/env-fragments';

export const gatewayEnvSchema = z.object({
  ...commonEnv,
  ...grpcClientsEnv,
  ...oidcEnv,
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().default('127.0.0.1'),
  /** Largest accepted request body. */
  BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).max(10 * 1024 * 1024).default(64 * 1024),
  /** Requests per minute per client address on routes without user authentication. */
  RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: z.coerce.number().int().min(1).default(30),
  /** Set when behind a reverse proxy, so client addresses come from X-Forwarded-For. */
  TRUST_PROXY: z.stringbool().default(false),
});

export type GatewayConfig = z.infer<typeof gatewayEnvSchema>;
