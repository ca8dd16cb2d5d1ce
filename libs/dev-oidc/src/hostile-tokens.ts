import { generateKeyPair, SignJWT, type JWTPayload } from 'jose';
import type { DevOidcProvider } from './dev-oidc-provider';

/** What each hostile token is. Every one of them must be refused with 401 by a correct verifier. */
export const HOSTILE_TOKEN_DESCRIPTIONS = {
  garbage: 'not a JWT at all',
  truncated: 'a valid token cut before its signature',
  tamperedPayload: 'a valid signature over different claims (payload swapped)',
  expired: 'expired ten minutes ago',
  notYetValid: 'nbf ten minutes in the future',
  wrongAudience: 'issued for another audience',
  wrongIssuer: 'issued by another issuer (same key)',
  algNone: 'unsigned, alg "none"',
  unknownKey: 'signed by a key that is not in the JWKS, with its own kid',
  unknownKeySameKid: 'signed by a key that is not in the JWKS, claiming the provider key id',
  hmacWithPublicKeyPem: 'HS256 with the provider public key (SPKI PEM) as secret: algorithm confusion',
  hmacWithPublicJwk: 'HS256 with the provider public JWK (JSON) as secret: algorithm confusion',
  missingSubject: 'no sub claim',
  missingExpiry: 'no exp claim',
  userWithoutEmail: 'user token without email',
  clientWithoutOrg: 'client-credentials token without the organization claim',
  clientWithUnknownRole: 'client-credentials token with a role that does not exist',
} as const;

export type HostileTokenName = keyof typeof HOSTILE_TOKEN_DESCRIPTIONS;

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/**
 * Tokens a verifier trusting `provider` must refuse, each close to a valid one so that exactly one
 * thing is wrong. For tests only.
 */
export async function createHostileTokens(
  provider: DevOidcProvider,
  user: { email: string } = { email: 'mallory@example.com' },
): Promise<Record<HostileTokenName, string>> {
  const now = Math.floor(Date.now() / 1000);
  const valid: JWTPayload = {
    iss: provider.issuer,
    aud: provider.audience,
    sub: 'dev|hostile',
    iat: now,
    exp: now + 600,
    email: user.email,
    email_verified: true,
  };
  const without = (claim: string): JWTPayload =>
    Object.fromEntries(Object.entries(valid).filter(([k]) => k !== claim));
  const client: JWTPayload = { ...without('email'), sub: 'hostile@clients', gty: 'client-credentials' };

  const stranger = await generateKeyPair('RS256');
  const signWithStranger = (kid: string) =>
    new SignJWT(valid).setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid }).sign(stranger.privateKey);
  const signHmac = (secret: string) =>
    new SignJWT(valid)
      .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: provider.kid })
      .sign(new TextEncoder().encode(secret));

  const genuine = await provider.signToken(valid);
  const other = await provider.signToken({ ...valid, sub: 'dev|someone-else', email: 'admin@example.com' });
  const [header, , signature] = genuine.split('.');
  const [, otherPayload] = other.split('.');

  return {
    garbage: 'not-a-jwt',
    truncated: genuine.slice(0, genuine.lastIndexOf('.') + 1),
    tamperedPayload: `${header}.${otherPayload}.${signature}`,
    expired: await provider.signToken({ ...valid, iat: now - 3600, exp: now - 600 }),
    notYetValid: await provider.signToken({ ...valid, nbf: now + 600 }),
    wrongAudience: await provider.signToken({ ...valid, aud: 'https://another-api.example.com' }),
    wrongIssuer: await provider.signToken({ ...valid, iss: 'https://evil-idp.example.com/' }),
    algNone: `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url(valid)}.`,
    unknownKey: await signWithStranger('stranger-key'),
    unknownKeySameKid: await signWithStranger(provider.kid),
    hmacWithPublicKeyPem: await signHmac(provider.publicKeyPem),
    hmacWithPublicJwk: await signHmac(JSON.stringify(provider.publicJwk)),
    missingSubject: await provider.signToken(without('sub')),
    missingExpiry: await provider.signToken(without('exp')),
    userWithoutEmail: await provider.signToken(without('email')),
    clientWithoutOrg: await provider.signToken(client),
    clientWithUnknownRole: await provider.signToken({
      ...client,
      [provider.orgClaim]: 'org_1',
      [provider.roleClaim]: 'SUPERUSER',
    }),
  };
}
