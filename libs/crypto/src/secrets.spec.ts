import { randomBytes } from 'node:crypto';
import { generateSecret, hashSecret, openSealedSecret, sealSecret } from './secrets';

describe('secrets', () => {
  it('generates prefixed, unique, url-safe secrets', () => {
    const a = generateSecret('sts_inv');
    const b = generateSecret('sts_inv');
    expect(a).toMatch(/^sts_inv_[A-Za-z0-9_-]{43}$/);
    expect(a).not.toBe(b);
  });

  it('hashes deterministically', () => {
    expect(hashSecret('x')).toBe(hashSecret('x'));
    expect(hashSecret('x')).not.toBe(hashSecret('y'));
  });

  it('seals and opens, bound to key and context', () => {
    const key = randomBytes(32);
    const sealed = sealSecret('sts_inv_secret', key, 'invite.created');
    expect(sealed).not.toContain('sts_inv_secret');
    expect(openSealedSecret(sealed, key, 'invite.created')).toBe('sts_inv_secret');
    expect(() => openSealedSecret(sealed, key, 'other')).toThrow();
    expect(() => openSealedSecret(sealed, randomBytes(32), 'invite.created')).toThrow();
    expect(() => openSealedSecret('v1.garbage', key, 'invite.created')).toThrow();
  });
});
