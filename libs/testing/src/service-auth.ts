import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { encodeSigningKey, formatTrustedKeys, parseTrustedKeys } from '@sts/config/service-keys';
import { ServiceTokenIssuer } from '@sts/grpc/service-token';
import { SERVICE_NAMES, type ServiceName } from '@sts/vocabulary/services';

/**
 * Service keys for one test file, the way the system has them: every service its own Ed25519 key pair,
 * every process trusting the public keys by name. `envOf(service)` is the environment of one process
 * (its own private key, the public keys); `as(target, caller)` the credentials a test's gRPC client
 * presents with the caller's own key (the gateway's unless told otherwise).
 */
export function testServiceAuth() {
  const pairs = Object.fromEntries(
    SERVICE_NAMES.map((name) => [name, generateKeyPairSync('ed25519')]),
  ) as Record<ServiceName, { privateKey: KeyObject; publicKey: KeyObject }>;
  const SERVICE_TRUSTED_KEYS = formatTrustedKeys(SERVICE_NAMES.map((name) => [name, pairs[name].publicKey]));
  return {
    /** Every service's public key, by name. */
    SERVICE_TRUSTED_KEYS,
    /** The same, parsed, for a configuration not read from the environment. */
    trustedKeys: parseTrustedKeys(SERVICE_TRUSTED_KEYS),
    /** The environment of one process: its own private key and the public keys of all. */
    envOf: (service: ServiceName) => ({
      SERVICE_SIGNING_KEY: encodeSigningKey(pairs[service].privateKey),
      SERVICE_TRUSTED_KEYS,
    }),
    /** A service's private key: its name is all a token of it may claim. */
    signingKeyOf: (service: ServiceName) => pairs[service].privateKey,
    as: (target: ServiceName, caller: ServiceName = 'gateway') => ({
      issuer: new ServiceTokenIssuer(pairs[caller].privateKey, caller),
      target,
    }),
  };
}
