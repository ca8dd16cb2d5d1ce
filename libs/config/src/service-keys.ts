import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { SERVICE_NAMES, type ServiceName } from '@sts/vocabulary/services';

/**
 * The keys of the service tokens (@sts/grpc/service-token), as the environment gives them. Each process
 * that calls services holds its own Ed25519 private key (`SERVICE_SIGNING_KEY`); a service holds only
 * the public keys of its callers, by the caller's name (`SERVICE_TRUSTED_KEYS`). docs/decisions.md
 * "Trust between services".
 */

/** Public keys by the name of the service holding the private key; a name may have several (rotation). */
export type TrustedServiceKeys = ReadonlyMap<ServiceName, readonly KeyObject[]>;

const PEM = /-----BEGIN [A-Z ]+-----/;

function ed25519(key: KeyObject): KeyObject {
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new Error(`an Ed25519 key is required, not ${key.asymmetricKeyType ?? 'a secret key'}`);
  }
  return key;
}

/** An Ed25519 private key: PKCS#8, PEM or base64 of the DER bytes. */
export function parseSigningKey(text: string): KeyObject {
  const value = text.trim();
  return ed25519(
    PEM.test(value)
      ? createPrivateKey(value)
      : createPrivateKey({ key: Buffer.from(value, 'base64'), format: 'der', type: 'pkcs8' }),
  );
}

/** An Ed25519 public key: SPKI, PEM or base64 of the DER bytes. */
export function parsePublicKey(text: string): KeyObject {
  const value = text.trim();
  return ed25519(
    PEM.test(value)
      ? createPublicKey(value)
      : createPublicKey({ key: Buffer.from(value, 'base64'), format: 'der', type: 'spki' }),
  );
}

/**
 * `gateway=<public key>,notification=<public key>`: each entry names the service whose private key
 * signs the tokens this public key verifies. A name may come more than once (old and new key while
 * a key is rotated). Error messages never quote a key.
 */
export function parseTrustedKeys(text: string): TrustedServiceKeys {
  const keys = new Map<ServiceName, KeyObject[]>();
  const entries = text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (entries.length === 0) throw new Error('names no key');
  for (const entry of entries) {
    const separator = entry.indexOf('=');
    const name = (separator < 0 ? '' : entry.slice(0, separator)).trim();
    if (!(SERVICE_NAMES as readonly string[]).includes(name)) {
      throw new Error(
        `each entry is <service>=<public key> with a service of ${SERVICE_NAMES.join(', ')}; got "${name.slice(0, 20)}"`,
      );
    }
    let key: KeyObject;
    try {
      key = parsePublicKey(entry.slice(separator + 1));
    } catch (error) {
      throw new Error(
        `the key of ${name} is not an Ed25519 public key (SPKI, base64 or PEM): ${reasonOf(error)}`,
      );
    }
    const service = name as ServiceName;
    keys.set(service, [...(keys.get(service) ?? []), key]);
  }
  return keys;
}

/** base64 of the PKCS#8 DER bytes: the form `npm start`, the tests and deploy/README.md write. */
export function encodeSigningKey(privateKey: KeyObject): string {
  return privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64');
}

/** base64 of the SPKI DER bytes of a public key, or of the public half of a private key. */
export function encodePublicKey(key: KeyObject): string {
  const publicKey = key.type === 'private' ? createPublicKey(key) : key;
  return publicKey.export({ format: 'der', type: 'spki' }).toString('base64');
}

/** The `SERVICE_TRUSTED_KEYS` value naming these keys (private keys give their public half). */
export function formatTrustedKeys(keys: Iterable<readonly [ServiceName, KeyObject]>): string {
  return [...keys].map(([name, key]) => `${name}=${encodePublicKey(key)}`).join(',');
}

/** The message of an error (node:crypto's come from another realm under jest, so not `instanceof Error`). */
export function reasonOf(error: unknown): string {
  return typeof error === 'object' && error !== null && 'message' in error
    ? String(error.message)
    : String(error);
}
