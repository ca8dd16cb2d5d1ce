import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Long random secret with a recognisable prefix (`sts_inv_…`), so that secret scanners can find
 * leaked ones. 32 random bytes = 256 bits: far beyond guessing, so a plain SHA-256 is enough at rest.
 */
export function generateSecret(prefix: string, bytes = 32): string {
  return `${prefix}_${randomBytes(bytes).toString('base64url')}`;
}

/** SHA-256 (hex) of a high-entropy secret, for storage and lookup. Not for passwords. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

const SEAL_VERSION = 'v1';

/**
 * Authenticated encryption (AES-256-GCM) for a secret that must travel through a durable outbox or
 * stream to be e-mailed. `context` binds the ciphertext to its purpose (e.g. the event type), so a
 * sealed value cannot be replayed elsewhere.
 */
export function sealSecret(plaintext: string, key: Buffer, context: string): string {
  assertKey(key);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return [
    SEAL_VERSION,
    iv.toString('base64url'),
    body.toString('base64url'),
    cipher.getAuthTag().toString('base64url'),
  ].join('.');
}

export function openSealedSecret(sealed: string, key: Buffer, context: string): string {
  assertKey(key);
  const [version, iv, body, tag] = sealed.split('.');
  if (version !== SEAL_VERSION || !iv || !body || !tag) throw new Error('Unrecognised sealed secret');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAAD(Buffer.from(context, 'utf8'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
}

function assertKey(key: Buffer): void {
  if (key.length !== 32) throw new Error('Sealing key must be 32 bytes');
}
