import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppError } from '@sts/errors/app-error';
import { failureOf } from '@sts/testing/failure-of';
import { DevOidcProvider, devSubjectForEmail } from '@sts/dev-oidc/dev-oidc-provider';
import {
  createHostileTokens,
  HOSTILE_TOKEN_DESCRIPTIONS,
  type HostileTokenName,
} from '@sts/dev-oidc/hostile-tokens';
import { AccessTokenVerifier } from './access-token-verifier';
import { probeDevelopmentProvider } from './development-provider';

// The verifier against a running development provider: JWKS fetched over HTTP, client tokens from
// POST /oauth/token.

const AUDIENCE = 'https://api.security-telemetry.local';

const rejectionOf = (promise: Promise<unknown>) => failureOf(promise, AppError);

describe('AccessTokenVerifier against DevOidcProvider over HTTP', () => {
  let provider: DevOidcProvider;
  let verifier: AccessTokenVerifier;

  beforeAll(async () => {
    provider = await DevOidcProvider.create({ audience: AUDIENCE });
    await provider.start();
    provider.registerClient({
      clientId: 'integration',
      clientSecret: 'integration-secret-0123456789',
      orgId: 'org_int',
      role: 'ORG_ADMIN',
    });
    // No jwksUrl: derived from the issuer, as in production configuration.
    verifier = new AccessTokenVerifier({ issuer: provider.issuer, audience: AUDIENCE });
  });

  afterAll(async () => {
    await provider.stop();
  });

  it('accepts a user token', async () => {
    const token = await provider.issueUserToken({ email: 'grace@example.com', name: 'Grace Hopper' });
    await expect(verifier.verifyAuthorizationHeader(`Bearer ${token}`)).resolves.toEqual({
      kind: 'user',
      issuer: provider.issuer,
      subject: devSubjectForEmail('grace@example.com'),
      email: 'grace@example.com',
      emailVerified: true,
      name: 'Grace Hopper',
    });
  });

  it('accepts a client-credentials token obtained from POST /oauth/token', async () => {
    const response = await fetch(`${provider.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_id: 'integration',
        client_secret: 'integration-secret-0123456789',
        audience: AUDIENCE,
        grant_type: 'client_credentials',
      }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { access_token: string; token_type: string; expires_in: number };
    expect(body.token_type).toBe('Bearer');
    await expect(verifier.verify(body.access_token)).resolves.toEqual({
      kind: 'client',
      issuer: provider.issuer,
      subject: 'integration@clients',
      orgId: 'org_int',
      role: 'ORG_ADMIN',
    });
  });

  describe('hostile tokens', () => {
    let hostile: Record<HostileTokenName, string>;
    beforeAll(async () => {
      hostile = await createHostileTokens(provider);
    });

    it.each(Object.keys(HOSTILE_TOKEN_DESCRIPTIONS) as HostileTokenName[])(
      'refuses %s with 401',
      async (name) => {
        const error = await rejectionOf(verifier.verifyAuthorizationHeader(`Bearer ${hostile[name]}`));
        expect(error.code).toBe('UNAUTHENTICATED');
        expect(error.httpStatus).toBe(401);
      },
    );
  });

  it('keeps the last good keys while the key server is away, backs off, and stops trusting them after a bounded time', async () => {
    const keySet = await (await fetch(`${provider.issuer}/.well-known/jwks.json`)).text();
    let up = true;
    let hits = 0;
    const keyServer = createServer((_request, response) => {
      hits += 1;
      if (!up) return response.writeHead(503).end();
      response.writeHead(200, { 'content-type': 'application/json' }).end(keySet);
    });
    await new Promise<void>((resolve) => keyServer.listen(0, '127.0.0.1', resolve));
    let nowMs = Date.now();
    // Pacing, not an absence check: lets a background refresh answer before the fake clock moves on.
    const settle = () => new Promise((resolve) => setTimeout(resolve, 50));
    try {
      const resilient = new AccessTokenVerifier({
        issuer: provider.issuer,
        audience: AUDIENCE,
        jwksUrl: `http://127.0.0.1:${(keyServer.address() as AddressInfo).port}/jwks`,
        jwksCacheMaxAgeMs: 1_000,
        jwksMaxStaleMs: 60_000,
        jwksCooldownMs: 1_000,
        cache: false,
        now: () => nowMs,
      });
      const token = await provider.issueUserToken({ email: 'outage@example.com' });
      await resilient.verify(token);
      expect(hits).toBe(1);

      up = false;
      // 100 verifications over the next 50 s: every one succeeds with the keys in hand, while the
      // refreshes in the background back off (1, 2, 4, 8, 16 s…) instead of following the traffic.
      for (let i = 0; i < 100; i += 1) {
        nowMs += 500;
        await expect(resilient.verify(token)).resolves.toMatchObject({ email: 'outage@example.com' });
        await settle();
      }
      expect(hits).toBeGreaterThan(2);
      expect(hits).toBeLessThanOrEqual(8);

      // Past the bound (60 s without a good refresh) the keys are no longer trusted: 503, not 401.
      nowMs += 20_000;
      expect((await rejectionOf(resilient.verify(token))).code).toBe('SERVICE_UNAVAILABLE');

      // The server returns; after the back-off the next verification fetches and succeeds.
      up = true;
      nowMs += 5 * 60_000;
      await expect(resilient.verify(token)).resolves.toMatchObject({ email: 'outage@example.com' });
    } finally {
      keyServer.close();
    }
  });

  it('answers 503, not 401, when the identity provider keys cannot be fetched', async () => {
    const down = await DevOidcProvider.create({ audience: AUDIENCE });
    await down.start();
    const issuer = down.issuer;
    const token = await down.issueUserToken({ email: 'x@example.com' });
    await down.stop();
    const orphan = new AccessTokenVerifier({ issuer, audience: AUDIENCE, jwksTimeoutMs: 2_000 });
    const error = await rejectionOf(orphan.verify(token));
    expect(error.code).toBe('SERVICE_UNAVAILABLE');
  });

  describe('the development provider (NODE_ENV=production refuses it)', () => {
    it('says what it is in its JWKS; the probe tells it from a provider that does not, and from none', async () => {
      const playingReal = await DevOidcProvider.create({ audience: AUDIENCE, announceDevelopment: false });
      await playingReal.start();
      try {
        expect(await probeDevelopmentProvider(provider.jwksUri, 2_000)).toBe(true);
        expect(await probeDevelopmentProvider(playingReal.jwksUri, 2_000)).toBe(false);
      } finally {
        await playingReal.stop();
      }
      // Gone: it cannot be told (the gateway starts; the verifier refuses the key set when it comes).
      expect(await probeDevelopmentProvider(playingReal.jwksUri, 2_000)).toBeUndefined();
      expect(await probeDevelopmentProvider(`${provider.url}/nothing-here`, 2_000)).toBeUndefined();
    });

    it('is never trusted by a verifier that refuses it: its tokens get 503, a real-looking provider still verifies', async () => {
      const refusing = new AccessTokenVerifier({
        issuer: provider.issuer,
        audience: AUDIENCE,
        refuseDevelopmentProvider: true,
        cache: false,
      });
      const token = await provider.issueUserToken({ email: 'grace@example.com' });
      const error = await rejectionOf(refusing.verify(token));
      expect([error.code, error.httpStatus]).toEqual(['SERVICE_UNAVAILABLE', 503]);

      const playingReal = await DevOidcProvider.create({ audience: AUDIENCE, announceDevelopment: false });
      await playingReal.start();
      try {
        const trusting = new AccessTokenVerifier({
          issuer: playingReal.issuer,
          audience: AUDIENCE,
          refuseDevelopmentProvider: true,
        });
        await expect(
          trusting.verify(await playingReal.issueUserToken({ email: 'grace@example.com' })),
        ).resolves.toMatchObject({ email: 'grace@example.com' });
      } finally {
        await playingReal.stop();
      }
    });
  });
});
