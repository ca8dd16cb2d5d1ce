import { commonEnv } from '@sts/config/env-fragments';
import { loadConfig } from '@sts/config/load-config';
import { z } from 'zod';

const port = z.coerce.number().int().min(0).max(65535);

export const PRODUCTION_REFUSAL =
  'dev-mailbox is a development mail sink and refuses to run with NODE_ENV=production; ' +
  'set SMTP_URL to a real mail server instead.';

export const devMailboxEnvSchema = z.object({
  ...commonEnv,
  NODE_ENV: commonEnv.NODE_ENV.refine((value) => value !== 'production', PRODUCTION_REFUSAL),
  /** Interface both servers listen on; 0.0.0.0 inside a container. */
  DEV_MAILBOX_HOST: z.string().min(1).default('127.0.0.1'),
  DEV_MAILBOX_SMTP_PORT: port.default(1025),
  DEV_MAILBOX_HTTP_PORT: port.default(8025),
  /** Only the newest this many messages are kept (in memory). */
  DEV_MAILBOX_MAX_MESSAGES: z.coerce.number().int().min(1).max(10_000).default(200),
});

export type DevMailboxConfig = z.infer<typeof devMailboxEnvSchema>;

/** The mailbox's configuration; with NODE_ENV=production a ConfigError that says why it does not run. */
export function loadDevMailboxConfig(
  env: Record<string, string | undefined> = process.env,
): DevMailboxConfig {
  return loadConfig(devMailboxEnvSchema, env);
}
