import { join, resolve } from 'node:path';
import { commonEnv, dashboardClientEnv } from '@sts/config/env-fragments';
import { loadConfig } from '@sts/config/load-config';
import type { PublicClient } from '@sts/dev-oidc/authorization-code-flow';
import { CLIENT_ID_PATTERN } from '@sts/dev-oidc/client-registry';
import { z } from 'zod';

export const PRODUCTION_REFUSAL =
  'dev-idp is a development identity provider and refuses to run with NODE_ENV=production; ' +
  'configure OIDC_ISSUER/OIDC_AUDIENCE for a real identity provider instead.';

/** Environment of the development identity provider and of its token CLI (they must agree). */
export const devIdpEnvSchema = z.object({
  ...commonEnv,
  NODE_ENV: commonEnv.NODE_ENV.refine((value) => value !== 'production', PRODUCTION_REFUSAL),
  DEV_IDP_PORT: z.coerce.number().int().min(0).max(65535).default(4400),
  /** Interface to listen on; 0.0.0.0 inside a container. */
  DEV_IDP_HOST: z.string().min(1).default('127.0.0.1'),
  /** `iss` of the tokens. Defaults to `http://127.0.0.1:${DEV_IDP_PORT}`. */
  DEV_IDP_ISSUER: z.url({ protocol: /^https?$/ }).optional(),
  OIDC_AUDIENCE: z.string().min(1).default('https://api.security-telemetry.local'),
  /** Holds `signing-key.json` and `clients.json`. */
  DEV_IDP_DATA_DIR: z.string().min(1).default('.dev/idp'),
  /** The web dashboard's OpenID client id (the name the design doc gives it). */
  DASHBOARD_OIDC_CLIENT_ID: dashboardClientEnv.DASHBOARD_OIDC_CLIENT_ID.refine(
    (id) => CLIENT_ID_PATTERN.test(id),
    'letters, digits, ".", "_" or "-" (at most 128)',
  ),
  /** Origins the dashboard is served from: each may sign in (`/auth/callback`) and call the token endpoint. */
  DEV_IDP_DASHBOARD_URLS: z
    .string()
    .default('http://localhost:8080,http://127.0.0.1:8080')
    .transform((value, context): string[] => {
      const origins = value
        .split(',')
        .map((entry) => entry.trim())
        .filter(Boolean)
        .map(originOf);
      if (origins.length > 0 && origins.every((origin) => origin !== undefined)) return [...new Set(origins)];
      context.addIssue({
        code: 'custom',
        message: 'origins such as http://localhost:8080 (scheme, host and port only), separated by commas',
      });
      return z.NEVER;
    }),
});

export interface DevIdpConfig {
  readonly nodeEnv: 'development' | 'test' | 'production';
  readonly logLevel: z.infer<typeof devIdpEnvSchema>['LOG_LEVEL'];
  readonly port: number;
  readonly host: string;
  readonly issuer: string;
  readonly audience: string;
  readonly keyFile: string;
  readonly clientsFile: string;
  /** The web dashboard, signing users in with the authorization code flow. */
  readonly dashboardClient: PublicClient;
}

/** The provider's configuration; with NODE_ENV=production a ConfigError that says why it does not run. */
export function loadDevIdpConfig(env: Record<string, string | undefined> = process.env): DevIdpConfig {
  const parsed = loadConfig(devIdpEnvSchema, env);
  const dataDir = resolve(parsed.DEV_IDP_DATA_DIR);
  return {
    nodeEnv: parsed.NODE_ENV,
    logLevel: parsed.LOG_LEVEL,
    port: parsed.DEV_IDP_PORT,
    host: parsed.DEV_IDP_HOST,
    issuer: parsed.DEV_IDP_ISSUER ?? `http://127.0.0.1:${parsed.DEV_IDP_PORT}`,
    audience: parsed.OIDC_AUDIENCE,
    keyFile: join(dataDir, 'signing-key.json'),
    clientsFile: join(dataDir, 'clients.json'),
    dashboardClient: {
      clientId: parsed.DASHBOARD_OIDC_CLIENT_ID,
      redirectUris: parsed.DEV_IDP_DASHBOARD_URLS.map((origin) => `${origin}/auth/callback`),
      postLogoutRedirectUris: parsed.DEV_IDP_DASHBOARD_URLS.map((origin) => `${origin}/`),
    },
  };
}

/** `http://host:port` of an http(s) URL without path, query or credentials; undefined otherwise. */
function originOf(entry: string): string | undefined {
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return undefined;
  }
  const bare = url.pathname === '/' && !/[?#]/.test(entry) && !url.username && !url.password;
  return bare && ['http:', 'https:'].includes(url.protocol) ? url.origin : undefined;
}
