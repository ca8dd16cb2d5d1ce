import { isIP } from 'node:net';
import { z } from 'zod';
import {
  commonEnv,
  dashboardClientEnv,
  grpcClientsEnv,
  natsEnv,
  observabilityEnv,
  oidcEnv,
} from '@sts/config/env-fragments';

export const gatewayEnvSchema = z.object({
  ...commonEnv,
  ...grpcClientsEnv,
  ...oidcEnv,
  ...natsEnv,
  ...observabilityEnv,
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** Its redirect URI at OIDC_ISSUER is `<origin>/auth/callback`. */
  ...dashboardClientEnv,
  /**
   * The dashboard's build (`npm run build` writes dist/apps/dashboard; the gateway image carries it
   * beside main.js). Without a build there the gateway serves the API only, and says so at start.
   */
  DASHBOARD_DIR: z.string().min(1).optional(),
  /**
   * Whether `/docs` (Swagger UI, and the OpenAPI document at `/docs/json`) is served. Unset: yes, but not
   * with NODE_ENV=production (`apiDocsServed`): it shares the dashboard's origin, so a flaw in it would be
   * one in the dashboard, and its audience is developers, not the dashboard's users.
   */
  API_DOCS_ENABLED: z.stringbool().optional(),
  HOST: z.string().default('127.0.0.1'),
  /**
   * After SIGTERM, how long the gateway goes on serving with /readyz failing and every answer closing its
   * connection, so that load balancers and keep-alive clients move to other replicas before it stops listening.
   */
  SHUTDOWN_DRAIN_MS: z.coerce.number().int().min(0).max(60_000).default(3_000),
  /** Largest accepted request body. */
  BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(10 * 1024 * 1024)
    .default(64 * 1024),
  /**
   * Largest telemetry batch body (POST /api/device/telemetry); larger ones get 413. The gateway takes less
   * when NATS's max_payload (less room for headers) is smaller: a batch it accepts must fit in one message.
   */
  TELEMETRY_BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(16 * 1024 * 1024)
    .default(2 * 1024 * 1024),
  /** How long a telemetry batch may wait for JetStream's acknowledgement before the agent gets 503. */
  TELEMETRY_PUBLISH_TIMEOUT_MS: z.coerce.number().int().min(100).max(30_000).default(3_000),
  /** How long a device token's owner and status are reused; device events evict sooner. 0 disables. */
  DEVICE_CACHE_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(60_000),
  /** Requests per minute per client address on routes without user authentication. */
  RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: z.coerce.number().int().min(1).default(30),
  /** POST /api/device/enroll requests per minute per client address (mass roll-outs share NAT addresses). */
  ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: z.coerce.number().int().min(1).default(600),
  /**
   * Signed-in changes (POST, PUT, PATCH, DELETE behind a bearer token) per minute per subject, and per
   * organization from all its callers; then 429 until the minute ends. Reads are never counted.
   */
  WRITES_PER_SUBJECT_PER_MINUTE: z.coerce.number().int().min(1).default(600),
  WRITES_PER_ORG_PER_MINUTE: z.coerce.number().int().min(1).default(2400),
  /**
   * Failed Stripe webhooks (a malformed or stale Stripe-Signature, a signature that does not verify) per
   * minute per client address; then the address waits until the minute ends. Verified ones never count.
   */
  STRIPE_WEBHOOK_FAILURES_PER_MINUTE: z.coerce.number().int().min(1).default(30),
  /** Failed enrollments (bad key or code) per minute per client address (an IPv6 client: its /64). */
  ENROLL_FAILURES_PER_MINUTE: z.coerce.number().int().min(1).default(20),
  /**
   * Failed enrollments per minute per enrollment key, from all addresses together. Beyond it only the
   * networks (IPv4 /24, IPv6 /48) that failed with the key this minute wait; agents elsewhere with good
   * codes go on, so a few guessers cannot lock an organization's enrollments. Beyond twice it every
   * request with the key waits until the minute ends: the hard bound on guesses per key.
   */
  ENROLL_KEY_FAILURES_PER_MINUTE: z.coerce.number().int().min(1).default(200),
  /**
   * Telemetry batches (POST /api/device/telemetry) per device per minute. An agent sends a few a minute
   * and drains a full default spool (about 500 batches of 1,000 events) within one minute.
   */
  TELEMETRY_BATCHES_PER_DEVICE_PER_MINUTE: z.coerce.number().int().min(1).default(600),
  /**
   * Telemetry bytes (request bodies of accepted batches) per organization per minute, counted across the
   * replicas; then 429 until the minute ends. 64 MiB is some 500,000 events a minute: far beyond what an
   * organization's agents report, far below what one stolen token could push.
   */
  TELEMETRY_ORG_BYTES_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1024)
    .default(64 * 1024 * 1024),
  /**
   * Failed device authentications (missing, malformed or unknown X-Device-Token) per client address per
   * minute; then 429 for further tokens this gateway does not know, until the minute ends.
   */
  DEVICE_AUTH_FAILURES_PER_MINUTE: z.coerce.number().int().min(1).default(20),
  /**
   * How long a resolved caller (membership, role, dashboard access) is reused for the same token
   * subject. Membership events evict it sooner (within milliseconds); the TTL bounds staleness if
   * an event is missed. 0 disables the cache.
   */
  CALLER_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  /** How long an organization's license is reused for GET /api/session. 0 disables the cache. */
  LICENSE_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  /**
   * How long an answer of GET /api/analytics/summary or /series is reused for the same organization and
   * query. Device events evict the organization's answers. 0 disables the cache.
   */
  ANALYTICS_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(1_000),
  /** How long a page of GET /api/members is reused. Membership events evict it sooner. 0 disables. */
  MEMBER_LIST_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  /**
   * Which X-Forwarded-For hops to believe for the client address (per-address limits depend on it):
   * `false` (none: the peer's address), a number of proxies in front of the gateway (`true` means 1),
   * or the proxies' addresses and networks (`10.0.0.0/8,192.168.1.10`). Never every hop: a client
   * could then pick any address by sending the header itself.
   */
  TRUST_PROXY: z
    .string()
    .default('false')
    .transform((value, context): false | number | string[] => {
      const trimmed = value.trim().toLowerCase();
      if (trimmed === 'false' || trimmed === '' || trimmed === '0') return false;
      if (trimmed === 'true') return 1;
      if (/^\d{1,2}$/.test(trimmed)) return Number(trimmed);
      const entries = trimmed
        .split(',')
        .map((entry) => entry.trim())
        .filter(Boolean);
      if (entries.length > 0 && entries.every(isAddressOrNetwork)) return entries;
      context.addIssue({
        code: 'custom',
        message: 'false, a number of proxies, or addresses/CIDR networks separated by commas',
      });
      return z.NEVER;
    }),
  /**
   * `Strict-Transport-Security: max-age=<this>; includeSubDomains` on every answer to a request that came
   * over HTTPS. The gateway has no TLS listener, so it knows HTTPS only from `X-Forwarded-Proto` of a proxy
   * that TRUST_PROXY believes. 0 (default): no header. At most two years.
   */
  HSTS_MAX_AGE_SECONDS: z.coerce.number().int().min(0).max(63_072_000).default(0),
});

export type GatewayConfig = z.infer<typeof gatewayEnvSchema>;

/** `API_DOCS_ENABLED` as set, else on outside production. */
export function apiDocsServed(config: Pick<GatewayConfig, 'API_DOCS_ENABLED' | 'NODE_ENV'>): boolean {
  return config.API_DOCS_ENABLED ?? config.NODE_ENV !== 'production';
}

function isAddressOrNetwork(entry: string): boolean {
  const [address, prefix, ...rest] = entry.split('/');
  if (rest.length > 0 || !address) return false;
  const family = isIP(address);
  if (family === 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}
