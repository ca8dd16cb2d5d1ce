import { randomBytes } from 'node:crypto';
import { ServiceTokenIssuer, ServiceTokenVerifier } from './service-token';

describe('service tokens', () => {
  const key = randomBytes(32);
  let nowMs = Date.parse('2026-11-25T12:00:00Z');
  const now = () => nowMs;

  it('reuses a token until a third of its life is left, then mints another', async () => {
    const issuer = new ServiceTokenIssuer(key, 'gateway', now);
    const first = await issuer.tokenFor('identity');
    expect(issuer.tokenFor('identity')).toBe(first);
    nowMs += 6 * 60_000;
    expect(issuer.tokenFor('identity')).toBe(first);
    nowMs += 60_000;
    const second = await issuer.tokenFor('identity');
    expect(second).not.toBe(first);
  });

  it('answers from memory for a token it verified, and stops accepting it when it expires', async () => {
    const issuer = new ServiceTokenIssuer(key, 'gateway', now);
    const verifier = new ServiceTokenVerifier(key, 'identity', ['gateway'], now);
    const token = await issuer.tokenFor('identity');
    await expect(verifier.check(token)).resolves.toEqual({ ok: true, caller: 'gateway' });
    expect(verifier.check(token)).toEqual({ ok: true, caller: 'gateway' });
    nowMs += 11 * 60_000;
    await expect(verifier.check(token)).resolves.toMatchObject({ ok: false });
  });

  it('refuses keys shorter than 32 bytes', () => {
    expect(() => new ServiceTokenIssuer(randomBytes(16), 'gateway')).toThrow(/32 bytes/);
    expect(() => new ServiceTokenVerifier(randomBytes(16), 'identity', ['gateway'])).toThrow(/32 bytes/);
  });
});
