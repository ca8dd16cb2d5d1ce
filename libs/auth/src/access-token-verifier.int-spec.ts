import { AppError } from '@sts/errors/app-error';
import { DevOidcProvider, devSubjectForEmail } from '@sts/dev-oidc/dev-oidc-provider';
import {
  createHostileTokens,
  HOSTILE_TOKEN_DESCRIPTIONS,
  type HostileTokenName,
} from '@sts/dev-oidc/hostile-tokens';
import { AccessTokenVerifier } from './access-token-verifier';

// The verifier against a running development provider: JWKS fetched over HTTP, client tokens from
// POST /oauth/token.

const AUDIENCE = 'https://api.security-telemetry.local';

async function rejection(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error('expected a rejection');
}

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
        const error = await rejection(verifier.verifyAuthorizationHeader(`Bearer ${hostile[name]}`));
        expect(error.code).toBe('UNAUTHENTICATED');
        expect(error.httpStatus).toBe(401);
      },
    );
  });

  it('answers 503, not 401, when the identity provider keys cannot be fetched', async () => {
    const down = await DevOidcProvider.create({ audience: AUDIENCE });
    await down.start();
    const issuer = down.issuer;
    const token = await down.issueUserToken({ email: 'x@example.com' });
    await down.stop();
    const orphan = new AccessTokenVerifier({ issuer, audience: AUDIENCE, jwksTimeoutMs: 2_000 });
    const error = await rejection(orphan.verify(token));
    expect(error.code).toBe('SERVICE_UNAVAILABLE');
  });
});
