import { z } from 'zod';
import { commonEnv, grpcClientsEnv, natsEnv, oidcEnv } from '@sts/config/env-fragments';

export const gatewayEnvSchema = z.object({
  ...commonEnv,
  ...grpcClientsEnv,
  ...oidcEnv,
  ...natsEnv,
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().default('127.0.0.1'),
  /** Largest accepted request body. */
  BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).max(10 * 1024 * 1024).default(64 * 1024),
  /** Requests per minute per client address on routes without user authentication. */
  RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: z.coerce.number().int().min(1).default(30),
  /** POST /api/device/enroll requests per minute per client address (mass roll-outs share NAT addresses). */
  ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: z.coerce.number().int().min(1).default(600),
  /** Failed enrollments (bad key or code) per minute per enrollment key, and per client address. */
  ENROLL_FAILURES_PER_MINUTE: z.coerce.number().int().min(1).default(20),
  /**
   * How long a resolved caller (membership, role, dashboard access) is reused for the same token
   * subject. Membership events evict it sooner (within milliseconds); the TTL bounds staleness if
   * an event is missed. 0 disables the cache.
   */
  CALLER_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  /** How long an organization's license is reused for GET /api/session. 0 disables the cache. */
  LICENSE_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  /** How long a page of GET /api/members is reused. Membership events evict it sooner. 0 disables. */
  MEMBER_LIST_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  /** Set when behind a reverse proxy, so client addresses come from X-Forwarded-For. */
  TRUST_PROXY: z.stringbool().default(false),
});

export type GatewayConfig = z.infer<typeof gatewayEnvSchema>;
