import { generateKeyPairSync, randomBytes, createSecretKey } from 'node:crypto';
import type { TrustedServiceKeys } from '@sts/config/service-keys';
import { decodeJwt } from 'jose';
import { ServiceTokenIssuer, ServiceTokenVerifier, TOKEN_LIFETIME_SECONDS } from './service-token';

describe('service tokens', () => {
  const gateway = generateKeyPairSync('ed25519');
  const notification = generateKeyPairSync('ed25519');
  const trusted: TrustedServiceKeys = new Map([
    ['gateway', [gateway.publicKey]],
    ['notification', [notification.publicKey]],
  ]);
  let nowMs = Date.parse('2026-11-25T12:00:00Z');
  const now = () => nowMs;

  it('reuses a token until a third of its life is left, then mints another', async () => {
    const issuer = new ServiceTokenIssuer(gateway.privateKey, 'gateway', now);
    const first = await issuer.tokenFor('identity');
    expect(issuer.tokenFor('identity')).toBe(first);
    nowMs += 79_000;
    expect(issuer.tokenFor('identity')).toBe(first);
    nowMs += 2_000;
    const second = await issuer.tokenFor('identity');
    expect(second).not.toBe(first);
  });

  it('mints tokens of 120 s, each with an id of its own (issue 41)', async () => {
    const issuer = new ServiceTokenIssuer(gateway.privateKey, 'gateway', now);
    const claims = [
      decodeJwt((await issuer.tokenFor('identity')).slice('Bearer '.length)),
      decodeJwt((await issuer.tokenFor('billing')).slice('Bearer '.length)),
    ];
    expect(TOKEN_LIFETIME_SECONDS).toBe(120);
    for (const claim of claims) expect((claim.exp ?? 0) - (claim.iat ?? 0)).toBe(120);
    expect(claims[0]!.jti).toMatch(/^[0-9a-f-]{36}$/);
    expect(claims[1]!.jti).not.toBe(claims[0]!.jti);
  });

  it('answers from memory for a token it verified, and stops accepting it when it expires', async () => {
    const issuer = new ServiceTokenIssuer(gateway.privateKey, 'gateway', now);
    const verifier = new ServiceTokenVerifier(trusted, 'identity', ['gateway'], now);
    const token = await issuer.tokenFor('identity');
    await expect(verifier.check(token)).resolves.toEqual({ ok: true, caller: 'gateway' });
    expect(verifier.check(token)).toEqual({ ok: true, caller: 'gateway' });
    // Past its 120 s and the 30 s clock tolerance, a token taken from a call no longer works.
    nowMs += 151_000;
    await expect(verifier.check(token)).resolves.toMatchObject({ ok: false });
  });

  it("refuses a token signed with one service's key that names another service", async () => {
    const verifier = new ServiceTokenVerifier(trusted, 'identity', ['gateway', 'notification'], now);
    // The notifier's own key, claiming to be the gateway: a compromised notifier acting as the gateway.
    const impostor = new ServiceTokenIssuer(notification.privateKey, 'gateway', now);
    await expect(verifier.check(await impostor.tokenFor('identity'))).resolves.toEqual({
      ok: false,
      reason: 'invalid service token (not verified by a key of gateway)',
    });
    // The same key, speaking for itself, is accepted (as the notifier, for what the notifier may call).
    const itself = new ServiceTokenIssuer(notification.privateKey, 'notification', now);
    await expect(verifier.check(await itself.tokenFor('identity'))).resolves.toEqual({
      ok: true,
      caller: 'notification',
    });
  });

  it('refuses a token signed with a key no caller holds, and one for another audience', async () => {
    const verifier = new ServiceTokenVerifier(trusted, 'identity', ['gateway'], now);
    const stranger = new ServiceTokenIssuer(generateKeyPairSync('ed25519').privateKey, 'gateway', now);
    await expect(verifier.check(await stranger.tokenFor('identity'))).resolves.toMatchObject({ ok: false });
    const real = new ServiceTokenIssuer(gateway.privateKey, 'gateway', now);
    await expect(verifier.check(await real.tokenFor('billing'))).resolves.toEqual({
      ok: false,
      reason: 'invalid service token of gateway (ERR_JWT_CLAIM_VALIDATION_FAILED)',
    });
  });

  it('refuses a caller not on the list before checking any signature', async () => {
    const verifier = new ServiceTokenVerifier(trusted, 'enrollment', ['gateway'], now);
    const notifier = new ServiceTokenIssuer(notification.privateKey, 'notification', now);
    await expect(verifier.check(await notifier.tokenFor('enrollment'))).resolves.toEqual({
      ok: false,
      reason: 'service notification may not call enrollment',
    });
    await expect(verifier.check('Bearer not-a-jwt')).resolves.toEqual({
      ok: false,
      reason: 'invalid service token',
    });
    expect(verifier.check(undefined)).toEqual({ ok: false, reason: 'no service token' });
  });

  it("accepts either of a caller's keys while its key is rotated", async () => {
    const next = generateKeyPairSync('ed25519');
    const rotating: TrustedServiceKeys = new Map([['gateway', [gateway.publicKey, next.publicKey]]]);
    const verifier = new ServiceTokenVerifier(rotating, 'identity', ['gateway'], now);
    for (const key of [gateway.privateKey, next.privateKey]) {
      const issuer = new ServiceTokenIssuer(key, 'gateway', now);
      await expect(verifier.check(await issuer.tokenFor('identity'))).resolves.toEqual({
        ok: true,
        caller: 'gateway',
      });
    }
  });

  it('refuses to start without a public key of every allowed caller, or with keys that are not Ed25519', () => {
    expect(
      () =>
        new ServiceTokenVerifier(new Map([['gateway', [gateway.publicKey]]]), 'identity', [
          'gateway',
          'notification',
        ]),
    ).toThrow('identity serves notification, but SERVICE_TRUSTED_KEYS has no key of notification');
    expect(() => new ServiceTokenIssuer(gateway.publicKey, 'gateway')).toThrow(/Ed25519 private key/);
    expect(() => new ServiceTokenIssuer(createSecretKey(randomBytes(32)), 'gateway')).toThrow(
      /Ed25519 private key/,
    );
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    expect(
      () => new ServiceTokenVerifier(new Map([['gateway', [ec.publicKey]]]), 'identity', ['gateway']),
    ).toThrow(/Ed25519 public key/);
  });
});
