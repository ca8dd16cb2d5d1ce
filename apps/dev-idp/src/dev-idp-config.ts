import { join, resolve } from 'node:path';
import { commonEnv } from '@sts/config/env-fragments';
import { loadConfig } from '@sts/config/load-config';
import { z } from 'zod';

/** Environment of the development identity provider and of its token CLI (they must agree). */
const devIdpEnv = z.object({
  ...commonEnv,
  DEV_IDP_PORT: z.coerce.number().int().min(0).max(65535).default(4400),
  /** Interface to listen on; 0.0.0.0 inside a container. */
  DEV_IDP_HOST: z.string().min(1).default('127.0.0.1'),
  /** `iss` of the tokens. Defaults to `http://127.0.0.1:${DEV_IDP_PORT}`. */
  DEV_IDP_ISSUER: z.url({ protocol: /^https?$/ }).optional(),
  OIDC_AUDIENCE: z.string().min(1).default('https://api.security-telemetry.local'),
  /** Holds `signing-key.json` and `clients.json`. */
  DEV_IDP_DATA_DIR: z.string().min(1).default('.dev/idp'),
});

export interface DevIdpConfig {
  readonly nodeEnv: 'development' | 'test' | 'production';
  readonly logLevel: z.infer<typeof devIdpEnv>['LOG_LEVEL'];
  readonly port: number;
  readonly host: string;
  readonly issuer: string;
  readonly audience: string;
  readonly keyFile: string;
  readonly clientsFile: string;
}

export const PRODUCTION_REFUSAL =
  'dev-idp is a development identity provider and refuses to run with NODE_ENV=production; ' +
  'configure OIDC_ISSUER/OIDC_AUDIENCE for a real identity provider instead.';

export function loadDevIdpConfig(env: Record<string, string | undefined> = process.env): DevIdpConfig {
  const parsed = loadConfig(devIdpEnv, env);
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
  };
}
