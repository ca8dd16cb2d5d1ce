import { AppError } from '@sts/errors/app-error';
import { failureOf } from '@sts/testing/failure-of';
import { DevOidcProvider, devSubjectForEmail } from '@sts/dev-oidc/dev-oidc-provider';
import {
  createHostileTokens,
  HOSTILE_TOKEN_DESCRIPTIONS,
  type HostileTokenName,
} from '@sts/dev-oidc/hostile-tokens';
import { createLocalJWKSet } from 'jose';
import {
  AccessTokenVerifier,
  accessTokenVerifierOptionsFromEnv,
  defaultJwksUrl,
  parseBearer,
  type AccessTokenVerifierOptions,
} from './access-token-verifier';

const ISSUER = 'https://idp.test/';
const AUDIENCE = 'https://api.security-telemetry.local';

const rejectionOf = (promise: Promise<unknown>) => failureOf(promise, AppError);

describe('parseBearer', () => {
  it('returns the token of a Bearer header, scheme case-insensitive', () => {
    expect(parseBearer('Bearer abc.def.ghi')).toBe('abc.def.ghi');
    expect(parseBearer('bearer   abc.def.ghi ')).toBe('abc.def.ghi');
  });

  it.each([
    [undefined, 'Missing Authorization header'],
    ['', 'Missing Authorization header'],
    ['Basic dXNlcjpwYXNz', 'Authorization header must use the Bearer scheme'],
    ['abc.def.ghi', 'Authorization header must use the Bearer scheme'],
    ['Bearer', 'Bearer token is empty'],
    ['Bearer a b', 'Authorization header must use the Bearer scheme'],
    [['Bearer a', 'Bearer b'], 'Authorization header must appear once'],
  ])('refuses %p', (header, reason) => {
    expect(() => parseBearer(header)).toThrow(AppError);
    try {
      parseBearer(header);
    } catch (error) {
      expect((error as AppError).code).toBe('UNAUTHENTICATED');
      expect((error as AppError).detail).toBe(reason);
    }
  });
});

describe('AccessTokenVerifier (local key set)', () => {
  let provider: DevOidcProvider;
  let clock: number;

  const verifier = (options: Partial<AccessTokenVerifierOptions> = {}) =>
    new AccessTokenVerifier({
      issuer: ISSUER,
      audience: AUDIENCE,
      keySet: createLocalJWKSet(provider.jwks),
      now: () => clock,
      ...options,
    });

  beforeAll(async () => {
    provider = await DevOidcProvider.create({ issuer: ISSUER, audience: AUDIENCE });
  });

  beforeEach(() => {
    clock = Date.now();
  });

  describe('user tokens', () => {
    it('yields a user principal', async () => {
      const token = await provider.issueUserToken({ email: 'ada@example.com', name: 'Ada Lovelace' });
      await expect(verifier().verify(token)).resolves.toEqual({
        kind: 'user',
        issuer: 'https://idp.test',
        subject: devSubjectForEmail('ada@example.com'),
        email: 'ada@example.com',
        emailVerified: true,
        name: 'Ada Lovelace',
      });
    });

    it('verifies the Authorization header', async () => {
      const token = await provider.issueUserToken({ email: 'ada@example.com' });
      await expect(verifier().verifyAuthorizationHeader(`Bearer ${token}`)).resolves.toMatchObject({
        kind: 'user',
      });
      expect((await rejectionOf(verifier().verifyAuthorizationHeader(undefined))).code).toBe(
        'UNAUTHENTICATED',
      );
    });

    it('falls back for the name: nickname, preferred_username, e-mail local part', async () => {
      const v = verifier();
      const nick = await provider.issueUserToken({
        email: 'a@x.io',
        claims: { nickname: 'nick', preferred_username: 'pu' },
      });
      const preferred = await provider.issueUserToken({
        email: 'b@x.io',
        claims: { preferred_username: 'pu' },
      });
      const bare = await provider.issueUserToken({ email: 'carol@x.io' });
      expect(await v.verify(nick)).toMatchObject({ name: 'nick' });
      expect(await v.verify(preferred)).toMatchObject({ name: 'pu' });
      expect(await v.verify(bare)).toMatchObject({ name: 'carol' });
    });

    it('counts the e-mail as verified only when email_verified is true', async () => {
      const v = verifier();
      const unverified = await provider.issueUserToken({ email: 'u@x.io', emailVerified: false });
      const absent = await provider.issueUserToken({
        email: 'v@x.io',
        claims: { email_verified: undefined },
      });
      const stringy = await provider.issueUserToken({ email: 'w@x.io', claims: { email_verified: 'yes' } });
      expect(await v.verify(unverified)).toMatchObject({ emailVerified: false });
      expect(await v.verify(absent)).toMatchObject({ emailVerified: false });
      expect(await v.verify(stringy)).toMatchObject({ emailVerified: false });
      expect(await v.verify(await provider.issueUserToken({ email: 'x@x.io' }))).toMatchObject({
        emailVerified: true,
      });
    });

    it('lets an absent email_verified count as verified only when told to, never an explicit false', async () => {
      const v = verifier({ requireEmailVerified: false });
      const absent = await provider.issueUserToken({
        email: 'v@x.io',
        claims: { email_verified: undefined },
      });
      const unverified = await provider.issueUserToken({ email: 'u@x.io', emailVerified: false });
      expect(await v.verify(absent)).toMatchObject({ emailVerified: true });
      expect(await v.verify(unverified)).toMatchObject({ emailVerified: false });
    });

    it('refuses tokens that live longer than accepted (exp - iat)', async () => {
      const long = await provider.issueUserToken({ email: 'l@x.io', expiresIn: 2 * 86_400 });
      expect((await rejectionOf(verifier().verify(long))).detail).toMatch(/lifetime/);
      const noIat = await provider.issueUserToken({
        email: 'l@x.io',
        expiresIn: 2 * 86_400,
        claims: { iat: undefined },
      });
      expect((await rejectionOf(verifier().verify(noIat))).detail).toMatch(/lifetime/);
      const hour = await provider.issueUserToken({ email: 'l@x.io', expiresIn: 3600 });
      await expect(verifier({ maxTokenLifetimeSeconds: 3600 }).verify(hour)).resolves.toMatchObject({
        kind: 'user',
      });
      expect((await rejectionOf(verifier({ maxTokenLifetimeSeconds: 3599 }).verify(hour))).code).toBe(
        'UNAUTHENTICATED',
      );
    });

    it('refuses a user token without email, saying so', async () => {
      const token = await provider.issueUserToken({ email: 'x@x.io', claims: { email: undefined } });
      const error = await rejectionOf(verifier().verify(token));
      expect(error.code).toBe('UNAUTHENTICATED');
      expect(error.detail).toMatch(/email/);
    });

    it('accepts the issuer with or without a trailing slash, and names one issuer for both', async () => {
      const token = await provider.issueUserToken({ email: 'ada@example.com' });
      const slashed = await provider.issueUserToken({
        email: 'ada@example.com',
        claims: { iss: `${ISSUER.replace(/\/+$/, '')}/` },
      });
      const plain = await verifier({ issuer: 'https://idp.test' }).verify(token);
      const withSlash = await verifier({ issuer: 'https://idp.test' }).verify(slashed);
      expect(plain).toMatchObject({ kind: 'user', issuer: 'https://idp.test' });
      expect(withSlash.issuer).toBe(plain.issuer);
    });
  });

  describe('client-credentials tokens', () => {
    it('yields a client principal with the role claim', async () => {
      const token = await provider.issueClientToken({
        clientId: 'integration',
        orgId: 'org_42',
        role: 'ORG_ADMIN',
      });
      await expect(verifier().verify(token)).resolves.toEqual({
        kind: 'client',
        issuer: 'https://idp.test',
        subject: 'integration@clients',
        orgId: 'org_42',
        role: 'ORG_ADMIN',
      });
    });

    it('defaults the role to ANALYST', async () => {
      const token = await provider.issueClientToken({ clientId: 'integration', orgId: 'org_42' });
      expect(await verifier().verify(token)).toMatchObject({ kind: 'client', role: 'ANALYST' });
    });

    it('takes a token without gty as a machine token only when its client id is on the list', async () => {
      const token = await provider.issueClientToken({
        clientId: 'm2m',
        orgId: 'org_7',
        role: 'APP_USER',
        claims: { gty: undefined },
      });
      expect(await verifier({ machineClientIds: ['m2m'] }).verify(token)).toMatchObject({
        kind: 'client',
        orgId: 'org_7',
        role: 'APP_USER',
      });
      // Not on the list: a user token without e-mail, refused (an absent e-mail no longer makes a machine).
      expect((await rejectionOf(verifier().verify(token))).detail).toMatch(/email/);
      expect((await rejectionOf(verifier({ machineClientIds: ['other'] }).verify(token))).detail).toMatch(
        /email/,
      );
    });

    it('uses the configured claim names', async () => {
      const token = await provider.issueClientToken({
        clientId: 'm2m',
        orgId: 'ignored',
        claims: { 'https://sts/org': 'org_9', 'https://sts/role': 'ORG_ADMIN' },
      });
      const v = verifier({ orgClaim: 'https://sts/org', roleClaim: 'https://sts/role' });
      expect(await v.verify(token)).toMatchObject({ kind: 'client', orgId: 'org_9', role: 'ORG_ADMIN' });
    });

    it('refuses a client token without the org claim or with an unknown role', async () => {
      const noOrg = await provider.issueClientToken({
        clientId: 'm2m',
        orgId: 'org_1',
        claims: { org_id: undefined },
      });
      const badRole = await provider.issueClientToken({
        clientId: 'm2m',
        orgId: 'org_1',
        claims: { role: 'ROOT' },
      });
      expect((await rejectionOf(verifier().verify(noOrg))).detail).toMatch(/org_id/);
      expect((await rejectionOf(verifier().verify(badRole))).detail).toMatch(/role/);
    });
  });

  describe('hostile tokens', () => {
    let hostile: Record<HostileTokenName, string>;
    beforeAll(async () => {
      hostile = await createHostileTokens(provider);
    });

    it.each(Object.keys(HOSTILE_TOKEN_DESCRIPTIONS) as HostileTokenName[])('refuses %s', async (name) => {
      const v = verifier();
      const error = await rejectionOf(v.verify(hostile[name]));
      expect(error.code).toBe('UNAUTHENTICATED');
      expect(error.httpStatus).toBe(401);
      expect(error.detail.length).toBeGreaterThan(0);
      expect(error.detail).not.toContain(hostile[name]);
      expect(v.stats().cacheSize).toBe(0);
    });

    it('gives short, specific reasons', async () => {
      const v = verifier();
      expect((await rejectionOf(v.verify(hostile.expired))).detail).toBe('Token has expired');
      expect((await rejectionOf(v.verify(hostile.wrongAudience))).detail).toBe(
        'Token audience is not accepted',
      );
      expect((await rejectionOf(v.verify(hostile.wrongIssuer))).detail).toBe('Token issuer is not trusted');
      expect((await rejectionOf(v.verify(hostile.notYetValid))).detail).toBe('Token is not yet valid');
      expect((await rejectionOf(v.verify(hostile.algNone))).detail).toBe(
        'Token signing algorithm is not allowed',
      );
      expect((await rejectionOf(v.verify(hostile.hmacWithPublicKeyPem))).detail).toBe(
        'Token signing algorithm is not allowed',
      );
      expect((await rejectionOf(v.verify(hostile.unknownKey))).detail).toBe('Token signing key is unknown');
      expect((await rejectionOf(v.verify(hostile.unknownKeySameKid))).detail).toBe(
        'Token signature is invalid',
      );
      expect((await rejectionOf(v.verify(hostile.missingSubject))).detail).toBe(
        'Token has no subject (sub) claim',
      );
      expect((await rejectionOf(v.verify(hostile.garbage))).detail).toBe('Token is malformed');
    });

    it('refuses an HMAC token even when the key resolver would hand out the public key as a secret', async () => {
      // Algorithm confusion: the allow-list is checked before any key is resolved.
      const naive = verifier({
        keySet: () => Promise.resolve(new TextEncoder().encode(provider.publicKeyPem)),
      });
      const error = await rejectionOf(naive.verify(hostile.hmacWithPublicKeyPem));
      expect(error.detail).toBe('Token signing algorithm is not allowed');
    });

    it('refuses oversized tokens before parsing', async () => {
      expect((await rejectionOf(verifier().verify('a'.repeat(20_000)))).detail).toBe(
        'Access token is too large',
      );
    });
  });

  it('refuses symmetric or "none" algorithms in its configuration', () => {
    expect(() => verifier({ algorithms: ['RS256', 'HS256'] })).toThrow(/HS256/);
    expect(() => verifier({ algorithms: ['none'] })).toThrow(/none/);
    expect(() => verifier({ algorithms: [] })).toThrow();
  });

  describe('cache', () => {
    it('answers a second verification of the same token from the cache', async () => {
      const v = verifier();
      const token = await provider.issueUserToken({ email: 'ada@example.com' });
      const first = await v.verify(token);
      const second = await v.verify(token);
      expect(second).toEqual(first);
      expect(v.stats()).toEqual({ verifications: 1, cacheHits: 1, cacheSize: 1 });
    });

    it('shares one verification between concurrent requests for the same token', async () => {
      const v = verifier();
      const token = await provider.issueUserToken({ email: 'ada@example.com' });
      await Promise.all([v.verify(token), v.verify(token), v.verify(token)]);
      expect(v.stats().verifications).toBe(1);
    });

    it('never caches failures', async () => {
      const v = verifier();
      const { expired } = await createHostileTokens(provider);
      await rejectionOf(v.verify(expired));
      await rejectionOf(v.verify(expired));
      expect(v.stats()).toEqual({ verifications: 2, cacheHits: 0, cacheSize: 0 });
    });

    it('rejects a token that expired while cached', async () => {
      const v = verifier({ clockToleranceSeconds: 0 });
      const token = await provider.issueUserToken({ email: 'ada@example.com', expiresIn: 30 });
      await v.verify(token);
      clock += 10_000;
      await v.verify(token);
      expect(v.stats().cacheHits).toBe(1);
      clock += 21_000;
      const error = await rejectionOf(v.verify(token));
      expect(error.detail).toBe('Token has expired');
      expect(v.stats()).toMatchObject({ verifications: 2, cacheSize: 0 });
    });

    it('re-verifies after the cache lifetime even when the token is still valid', async () => {
      const v = verifier({ cache: { maxAgeMs: 60_000 } });
      const token = await provider.issueUserToken({ email: 'ada@example.com', expiresIn: 3600 });
      await v.verify(token);
      clock += 61_000;
      await v.verify(token);
      expect(v.stats()).toMatchObject({ verifications: 2, cacheHits: 0 });
    });

    it('stays bounded', async () => {
      const v = verifier({ cache: { maxEntries: 20 } });
      for (let i = 0; i < 50; i += 1) {
        await v.verify(await provider.issueUserToken({ email: `user${i}@example.com` }));
      }
      expect(v.stats().cacheSize).toBeLessThanOrEqual(20);
    });

    it('can be turned off', async () => {
      const v = verifier({ cache: false });
      const token = await provider.issueUserToken({ email: 'ada@example.com' });
      await v.verify(token);
      await v.verify(token);
      expect(v.stats()).toEqual({ verifications: 2, cacheHits: 0, cacheSize: 0 });
    });
  });
});

describe('options from environment', () => {
  it('derives the JWKS URL from the issuer', () => {
    expect(defaultJwksUrl('https://idp.example.com/')).toBe('https://idp.example.com/.well-known/jwks.json');
    const options = accessTokenVerifierOptionsFromEnv({
      OIDC_ISSUER: 'https://idp.example.com/',
      OIDC_AUDIENCE: AUDIENCE,
      OIDC_ORG_CLAIM: 'org_id',
      OIDC_ROLE_CLAIM: 'role',
      OIDC_ALGORITHMS: ['RS256'],
      OIDC_REQUIRE_EMAIL_VERIFIED: false,
      OIDC_CLIENT_IDS: ['m2m'],
      OIDC_MAX_TOKEN_LIFETIME_SECONDS: 3600,
    });
    expect(options).toMatchObject({
      issuer: 'https://idp.example.com/',
      jwksUrl: 'https://idp.example.com/.well-known/jwks.json',
      algorithms: ['RS256'],
      requireEmailVerified: false,
      machineClientIds: ['m2m'],
      maxTokenLifetimeSeconds: 3600,
    });
    expect(
      accessTokenVerifierOptionsFromEnv({
        OIDC_ISSUER: 'https://idp.example.com/',
        OIDC_AUDIENCE: AUDIENCE,
        OIDC_JWKS_URL: 'https://keys.example.com/jwks',
        OIDC_ORG_CLAIM: 'org_id',
        OIDC_ROLE_CLAIM: 'role',
        OIDC_ALGORITHMS: ['RS256'],
        OIDC_REQUIRE_EMAIL_VERIFIED: true,
        OIDC_CLIENT_IDS: [],
        OIDC_MAX_TOKEN_LIFETIME_SECONDS: 86_400,
      }).jwksUrl,
    ).toBe('https://keys.example.com/jwks');
  });
});
