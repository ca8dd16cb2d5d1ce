import { grpcServerEnv, grpcTlsEnv } from '@sts/config/env-fragments';
import { z } from 'zod';

/**
 * The images' health probe reads the variables of the container it probes: a service's GRPC_PORT (and its
 * mutual TLS files, which the probe presents) or the gateway's PORT.
 */
export const healthcheckEnvSchema = z.object({
  ...grpcTlsEnv,
  /** What to ask instead of this container's own process: `grpc://host:port` or an http(s) URL. */
  HEALTHCHECK_URL: z
    .string()
    .refine((value) => {
      try {
        return ['grpc:', 'http:', 'https:'].includes(new URL(value).protocol);
      } catch {
        return false;
      }
    }, 'must be grpc://host:port or an http(s) URL')
    .optional(),
  /** Set in a service's container: the probe asks gRPC health on this port. */
  GRPC_PORT: grpcServerEnv.GRPC_PORT.optional(),
  /** Otherwise the gateway's HTTP port. */
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
});

export type HealthcheckConfig = z.infer<typeof healthcheckEnvSchema>;

/** What the probe asks: HEALTHCHECK_URL, else the service's gRPC health, else the gateway's probe route. */
export function healthcheckTarget(config: HealthcheckConfig, liveness: boolean): string {
  if (config.HEALTHCHECK_URL !== undefined) return config.HEALTHCHECK_URL;
  if (config.GRPC_PORT !== undefined) return `grpc://127.0.0.1:${config.GRPC_PORT}`;
  return `http://127.0.0.1:${config.PORT}/${liveness ? 'livez' : 'readyz'}`;
}
