import { AccessTokenVerifier } from '@sts/auth/access-token-verifier';
import {
  createLocalJWKSet,
  exportJWK,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWTPayload,
} from 'jose';

export const TEST_ISSUER = 'https://idp.test/';
export const TEST_AUDIENCE = 'https://api.security-telemetry.test';

/**
 * A local signing key and a real {@link AccessTokenVerifier} trusting only it (jose local key set,
 * no JWKS fetch), so gateway tests exercise the real token checks without a network.
 */
export class TestTokens {
  private constructor(
    private readonly privateKey: CryptoKey,
    readonly verifier: AccessTokenVerifier,
  ) {}

  static async create(): Promise<TestTokens> {
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'test-key', alg: 'ES256', use: 'sig' };
    const verifier = new AccessTokenVerifier({
      issuer: TEST_ISSUER,
      audience: TEST_AUDIENCE,
      keySet: createLocalJWKSet({ keys: [jwk] }),
      cache: false,
    });
    return new TestTokens(privateKey, verifier);
  }

  /** Signs any claims with the trusted key (iss, aud, iat and exp default to valid values). */
  async sign(claims: JWTPayload, key: CryptoKey = this.privateKey): Promise<string> {
    return new SignJWT({ ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: 'test-key', typ: 'at+jwt' })
      .setIssuer(claims.iss ?? TEST_ISSUER)
      .setAudience(claims.aud ?? TEST_AUDIENCE)
      .setIssuedAt()
      .setExpirationTime(claims.exp ?? '10m')
      .sign(key);
  }

  /** A dashboard user's token. The subject is the e-mail address, so tests can script identity by it. */
  user(email: string, claims: JWTPayload = {}): Promise<string> {
    return this.sign({ sub: email, email, email_verified: true, name: email.split('@')[0], ...claims });
  }

  /** A client-credentials token bound to an organization. */
  client(subject: string, orgId: string, role?: string): Promise<string> {
    return this.sign({ sub: subject, gty: 'client-credentials', org_id: orgId, ...(role ? { role } : {}) });
  }

  /** A token signed by a key the verifier does not know. */
  async foreign(email: string): Promise<string> {
    const { privateKey } = await generateKeyPair('ES256');
    return this.sign({ sub: email, email }, privateKey);
  }
}
