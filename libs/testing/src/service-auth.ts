import { randomBytes } from 'node:crypto';
import { ServiceTokenIssuer } from '@sts/grpc/service-token';
import type { ServiceName } from '@sts/vocabulary/services';

/**
 * A SERVICE_AUTH_KEY for one test file, and the credentials a test's gRPC client presents with it
 * (as the gateway unless told otherwise), so tests call services the way the system does.
 */
export function testServiceAuth() {
  const key = randomBytes(32);
  return {
    SERVICE_AUTH_KEY: key.toString('base64'),
    as: (target: ServiceName, caller: ServiceName = 'gateway') => ({
      issuer: new ServiceTokenIssuer(key, caller),
      target,
    }),
  };
}
