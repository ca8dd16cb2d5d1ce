import { hkdfSync, randomBytes } from 'node:crypto';
import {
  CODE_ALPHABET,
  deriveEnrollmentKeyring,
  generateEnrollmentCode,
  hashEnrollmentCode,
  looksLikeDeviceToken,
  looksLikeEnrollmentKey,
  normalizeEnrollmentCode,
} from './enrollment-secrets';
import { generateSecret } from '@sts/crypto/secrets';

describe('enrollment codes', () => {
  it('are two groups of four unambiguous characters joined by a hyphen', () => {
    for (let i = 0; i < 500; i++) {
      const code = generateEnrollmentCode();
      expect(code).toMatch(/^[23456789ABCDEFGHJKMNPQRSTUVWXYZ]{4}-[23456789ABCDEFGHJKMNPQRSTUVWXYZ]{4}$/);
    }
    expect(CODE_ALPHABET).not.toMatch(/[01OIL]/);
    expect(new Set(CODE_ALPHABET).size).toBe(31);
  });

  it('use every character of the alphabet', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 400; i++) for (const c of generateEnrollmentCode().replace('-', '')) seen.add(c);
    expect(seen.size).toBe(CODE_ALPHABET.length);
  });

  it('normalise case, whitespace and the hyphen', () => {
    expect(normalizeEnrollmentCode('7kqd-m3xp')).toBe('7KQD-M3XP');
    expect(normalizeEnrollmentCode('  7KQD M3XP \n')).toBe('7KQD-M3XP');
    expect(normalizeEnrollmentCode('7KQDM3XP')).toBe('7KQD-M3XP');
    expect(normalizeEnrollmentCode('7K QD - M3 XP')).toBe('7KQD-M3XP');
  });

  it('refuse what cannot be a code', () => {
    for (const bad of [
      '',
      '7KQD-M3X',
      '7KQD-M3XPP',
      '7KQD-M3X0',
      'OKQD-M3XP',
      '7KQD_M3XP',
      'ÄKQD-M3XP',
      'x'.repeat(100),
    ]) {
      expect(normalizeEnrollmentCode(bad)).toBeNull();
    }
  });

  it('are stored as an HMAC under a derived key, not as a plain hash', () => {
    const master = randomBytes(32);
    const keyring = deriveEnrollmentKeyring(master);
    expect(keyring.codeHmac).toHaveLength(32);
    expect(keyring.keySealing).toHaveLength(32);
    expect(keyring.codeHmac.equals(keyring.keySealing)).toBe(false);
    expect(keyring.codeHmac.equals(master)).toBe(false);
    const hash = hashEnrollmentCode('7KQD-M3XP', keyring.codeHmac);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hash).toBe(hashEnrollmentCode('7KQD-M3XP', deriveEnrollmentKeyring(Buffer.from(master)).codeHmac));
    expect(hash).not.toBe(hashEnrollmentCode('7KQD-M3XP', deriveEnrollmentKeyring(randomBytes(32)).codeHmac));
  });

  it('accept typed input of up to 64 characters and refuse longer input unread', () => {
    const padded = `7KQD${' '.repeat(56)}M3XP`;
    expect(padded).toHaveLength(64);
    expect(normalizeEnrollmentCode(padded)).toBe('7KQD-M3XP');
    expect(normalizeEnrollmentCode(`7KQD${' '.repeat(57)}M3XP`)).toBeNull();
  });

  it('are sealed and hashed under keys derived with HKDF-SHA256 and fixed labels, so stored rows stay readable', () => {
    const master = randomBytes(32);
    const hkdf = (label: string) => Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), label, 32));
    const keyring = deriveEnrollmentKeyring(master);
    expect(keyring.keySealing.equals(hkdf('enrollment-key'))).toBe(true);
    expect(keyring.codeHmac.equals(hkdf('enrollment-code'))).toBe(true);
  });

  it('need a 32-byte master key', () => {
    expect(() => deriveEnrollmentKeyring(randomBytes(16))).toThrow('32 bytes');
  });
});

describe('secret shapes', () => {
  it('recognise keys and tokens by prefix and length', () => {
    expect(looksLikeEnrollmentKey(generateSecret('sts_ek'))).toBe(true);
    expect(looksLikeEnrollmentKey(generateSecret('sts_dt'))).toBe(false);
    expect(looksLikeEnrollmentKey('sts_ek_short')).toBe(false);
    expect(looksLikeEnrollmentKey('')).toBe(false);
    expect(looksLikeDeviceToken(generateSecret('sts_dt'))).toBe(true);
    expect(looksLikeDeviceToken(`${generateSecret('sts_dt')}x`)).toBe(false);
  });
});
