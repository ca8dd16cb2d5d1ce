import { generateKeyPairSync } from 'node:crypto';
import { z } from 'zod';
import { grpcClientsEnv, grpcServerEnv } from './env-fragments';
import { loadConfig } from './load-config';
import {
  encodePublicKey,
  encodeSigningKey,
  formatTrustedKeys,
  parseSigningKey,
  parseTrustedKeys,
} from './service-keys';

describe('service keys in the environment', () => {
  const gateway = generateKeyPairSync('ed25519');
  const notification = generateKeyPairSync('ed25519');

  it('reads a private key as base64 PKCS#8 or PEM, and public keys by service name', () => {
    const pem = gateway.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    for (const text of [encodeSigningKey(gateway.privateKey), pem]) {
      expect(encodePublicKey(parseSigningKey(text))).toBe(encodePublicKey(gateway.publicKey));
    }
    const trusted = parseTrustedKeys(
      `${formatTrustedKeys([['gateway', gateway.privateKey]])}, notification=${notification.publicKey
        .export({ format: 'pem', type: 'spki' })
        .toString()}`,
    );
    expect([...trusted.keys()]).toEqual(['gateway', 'notification']);
    expect(encodePublicKey(trusted.get('gateway')![0]!)).toBe(encodePublicKey(gateway.publicKey));
    expect(encodePublicKey(trusted.get('notification')![0]!)).toBe(encodePublicKey(notification.publicKey));
  });

  it('keeps every key of a name listed twice (rotation)', () => {
    const next = generateKeyPairSync('ed25519');
    const trusted = parseTrustedKeys(
      formatTrustedKeys([
        ['gateway', gateway.publicKey],
        ['gateway', next.publicKey],
      ]),
    );
    expect(trusted.get('gateway')?.map(encodePublicKey)).toEqual([
      encodePublicKey(gateway.publicKey),
      encodePublicKey(next.publicKey),
    ]);
  });

  it('refuses at start what is not an Ed25519 key of a known service, without quoting the key', () => {
    const schema = z.object({ ...grpcServerEnv, ...grpcClientsEnv });
    const rsaLike = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const secretKey = encodeSigningKey(rsaLike.privateKey);
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(schema, { GRPC_PORT: '0', ...env });
        return '';
      } catch (error) {
        return (error as Error).message;
      }
    };
    const wrongType = problems({
      SERVICE_SIGNING_KEY: secretKey,
      SERVICE_TRUSTED_KEYS: `gateway=${encodePublicKey(rsaLike.publicKey)}`,
    });
    expect(wrongType).toContain('SERVICE_SIGNING_KEY: must be an Ed25519 private key');
    expect(wrongType).toContain('SERVICE_TRUSTED_KEYS: must be <service>=<Ed25519 public key>');
    expect(wrongType).not.toContain(secretKey.slice(10, 40));
    expect(
      problems({
        SERVICE_SIGNING_KEY: encodeSigningKey(gateway.privateKey),
        SERVICE_TRUSTED_KEYS: `mallory=${encodePublicKey(gateway.publicKey)}`,
      }),
    ).toContain(
      'with a service of gateway, identity, notification, billing, enrollment, analytics; got "mallory"',
    );
    const garbage = problems({ SERVICE_SIGNING_KEY: 'c2hvcnQ=', SERVICE_TRUSTED_KEYS: ',' });
    expect(garbage).toMatch(/SERVICE_SIGNING_KEY: must be an Ed25519 private key .*: error:/);
    expect(garbage).toMatch(/SERVICE_TRUSTED_KEYS: .*: names no key/);
    // A public key where the private one belongs.
    expect(
      problems({
        SERVICE_SIGNING_KEY: encodePublicKey(gateway.publicKey),
        SERVICE_TRUSTED_KEYS: formatTrustedKeys([['gateway', gateway.publicKey]]),
      }),
    ).toContain('SERVICE_SIGNING_KEY: must be an Ed25519 private key');
    expect(problems({})).toMatch(
      /SERVICE_TRUSTED_KEYS[\s\S]*SERVICE_SIGNING_KEY|SERVICE_SIGNING_KEY[\s\S]*SERVICE_TRUSTED_KEYS/,
    );
  });
});
