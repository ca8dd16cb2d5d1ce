import { createHmac, hkdfSync, randomInt } from 'node:crypto';
import { DEVICE_TOKEN_PREFIX, looksLikeDeviceToken } from '@sts/vocabulary/device-token';

/** Prefixes secret scanners can recognise (DESIGN.md section 3, Secrets). */
export const ENROLLMENT_KEY_PREFIX = 'sts_ek';
/** The device token's prefix and shape are shared with the gateway, which refuses other shapes itself. */
export { DEVICE_TOKEN_PREFIX, looksLikeDeviceToken };

/** Shape of `generateSecret(prefix)` (32 random bytes, base64url = 43 characters). */
const SECRET_SHAPE = (prefix: string) => new RegExp(`^${prefix}_[A-Za-z0-9_-]{43}$`);
const ENROLLMENT_KEY_SHAPE = SECRET_SHAPE(ENROLLMENT_KEY_PREFIX);

/** Whether a presented value can be an enrollment key at all (saves a lookup for garbage). */
export function looksLikeEnrollmentKey(value: string): boolean {
  return ENROLLMENT_KEY_SHAPE.test(value);
}

/**
 * Characters of enrollment codes: digits and upper-case letters without the ones people confuse
 * (0/O, 1/I/L). 31 symbols, 8 of them per code: 31^8 ≈ 8.5 · 10^11 ≈ 2^39.6.
 */
export const CODE_ALPHABET = '23456789ABCDEFGHJKMNPQRSTUVWXYZ';
const CODE_LENGTH = 8;
const CANONICAL_CODE = new RegExp(`^[${CODE_ALPHABET}]{4}-[${CODE_ALPHABET}]{4}$`);

/** A fresh one-time code in canonical form, `7KQD-M3XP` (uniform over the alphabet: crypto.randomInt). */
export function generateEnrollmentCode(): string {
  let raw = '';
  for (let i = 0; i < CODE_LENGTH; i++) raw += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return `${raw.slice(0, 4)}-${raw.slice(4)}`;
}

/**
 * The canonical form of a code as typed by a person: case, whitespace and the hyphen's position
 * do not matter (`7kqd m3xp`, ` 7KQDM3XP `, `7kqd-m3xp`). Null when it cannot be a code.
 */
export function normalizeEnrollmentCode(input: string): string | null {
  if (input.length > 64) return null;
  const compact = input.replace(/[\s-]+/g, '').toUpperCase();
  if (compact.length !== CODE_LENGTH) return null;
  const canonical = `${compact.slice(0, 4)}-${compact.slice(4)}`;
  return CANONICAL_CODE.test(canonical) ? canonical : null;
}

/**
 * Keys derived from ENROLLMENT_KEY_ENCRYPTION_KEY with HKDF-SHA256, one per purpose, so the
 * configured secret itself is never used directly and the two uses cannot interfere.
 */
export interface EnrollmentKeyring {
  /** AES-256-GCM key sealing enrollment keys at rest (`sealSecret`, context `enrollment-key:<org_id>`). */
  keySealing: Buffer;
  /** HMAC-SHA256 key of enrollment codes at rest. */
  codeHmac: Buffer;
}

export function deriveEnrollmentKeyring(masterKey: Buffer): EnrollmentKeyring {
  if (masterKey.length !== 32) throw new Error('ENROLLMENT_KEY_ENCRYPTION_KEY must be 32 bytes');
  const derive = (label: string) => Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), label, 32));
  return { keySealing: derive('enrollment-key'), codeHmac: derive('enrollment-code') };
}

/** Context binding a sealed enrollment key to its organization (a row copied to another org does not open). */
export function enrollmentKeyContext(orgId: string): string {
  return `enrollment-key:${orgId}`;
}

/**
 * How a code is stored: HMAC-SHA256 (hex) of its canonical form under a key that is not in the
 * database. Codes carry ~40 bits, so a plain hash could be reversed from a dump by trying all codes.
 */
export function hashEnrollmentCode(canonicalCode: string, hmacKey: Buffer): string {
  return createHmac('sha256', hmacKey).update(canonicalCode, 'utf8').digest('hex');
}
