import { z } from 'zod';
import {
  commonEnv,
  grpcClientsEnv,
  grpcServerEnv,
  natsEnv,
  postgresEnv,
  publicUrlEnv,
  sealingEnv,
  smtpEnv,
} from '@sts/config/env-fragments';
import { parsePrivateNetworks, type PrivateNetworks } from './private-networks';

export const notificationEnvSchema = z.object({
  ...commonEnv,
  ...postgresEnv,
  ...natsEnv,
  ...grpcServerEnv,
  GRPC_PORT: grpcServerEnv.GRPC_PORT.default(50052),
  /** Identity, asked for an organization's admins (the payment-failed e-mail), with notification's own key. */
  IDENTITY_GRPC_ADDRESS: grpcClientsEnv.IDENTITY_GRPC_ADDRESS,
  SERVICE_SIGNING_KEY: grpcClientsEnv.SERVICE_SIGNING_KEY,
  GRPC_DEADLINE_MS: grpcClientsEnv.GRPC_DEADLINE_MS,
  ...smtpEnv,
  ...sealingEnv,
  ...publicUrlEnv,
  /**
   * Where agents reach the API (the gateway's public address): the `--server` of the enroll command
   * in enrollment e-mails. Same rules as PUBLIC_APP_URL (http or https).
   */
  PUBLIC_API_URL: publicUrlEnv.PUBLIC_APP_URL.unwrap().default('http://localhost:8080'),
  /**
   * Which private, loopback and link-local addresses alert deliveries may reach besides public ones:
   * `false` none, `true` all (tests, a receiver on this host), or the networks on-premises receivers are on,
   * as CIDRs separated by commas (`10.20.0.0/16,fd00:1::/64`). Anything but `false` is logged at start.
   */
  ALERT_ALLOW_PRIVATE_NETWORKS: z
    .string()
    .default('false')
    .transform((value, context): PrivateNetworks => {
      const flag = z.stringbool().safeParse(value);
      if (flag.success) return flag.data;
      const parsed = parsePrivateNetworks(value);
      if ('networks' in parsed) return parsed.networks;
      context.addIssue({
        code: 'custom',
        message: `must be true, false, or networks as CIDRs separated by commas (10.0.0.0/8,fd00::/8); ${parsed.error}`,
      });
      return z.NEVER;
    }),
  /** One delivery attempt (DNS, connection, TLS, answer) at most. */
  ALERT_ATTEMPT_TIMEOUT_MS: z.coerce.number().int().min(500).max(60_000).default(10_000),
  /** Delivery attempts in flight at most, per process. */
  ALERT_DELIVERY_CONCURRENCY: z.coerce.number().int().min(1).max(1_000).default(32),
  /** An endpoint whose deliveries have failed this long is disabled, and its organization told in the feed. */
  ALERT_DISABLE_AFTER_HOURS: z.coerce
    .number()
    .int()
    .min(1)
    .max(24 * 90)
    .default(120),
  /** A PEM file of certificate authorities trusted besides the public ones (receivers with a private CA). */
  ALERT_EXTRA_CA_FILE: z.string().min(1).optional(),
});

export type NotificationConfig = z.infer<typeof notificationEnvSchema>;
