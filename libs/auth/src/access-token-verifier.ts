import { createHash } from 'node:crypto';
import { AppError } from '@sts/errors/app-error';
import { isRole, type Role } from '@sts/vocabulary/roles';
import { LRUCache } from 'lru-cache';
import { KeySetUnavailable, ResilientJwks } from './resilient-jwks';
import {
  errors as joseErrors,
  jwtVerify,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
} from 'jose';

/** A person signed in through the identity provider (dashboard user). Found by (`issuer`, `subject`). */
export interface UserPrincipal {
  readonly kind: 'user';
  readonly issuer: string;
  readonly subject: string;
  readonly email: string;
  readonly emailVerified: boolean;
  readonly name: string;
}

/** A server-side integration holding a client-credentials token; bound to one organization. */
export interface ClientPrincipal {
  readonly kind: 'client';
  readonly issuer: string;
  readonly subject: string;
  readonly orgId: string;
  readonly role: Role;
}

export type Principal = UserPrincipal | ClientPrincipal;

/** Algorithms accepted when none are configured (same default as `OIDC_ALGORITHMS`). */
export const DEFAULT_ALGORITHMS = ['RS256', 'ES256', 'PS256', 'EdDSA'] as const;

export interface AccessTokenVerifierOptions {
  /** Expected `iss`. A trailing slash is not significant (`https://idp/` and `https://idp` both match). */
  readonly issuer: string;
  /** Expected `aud` (one of them, when a list). */
  readonly audience: string | readonly string[];
  /** Defaults to {@link defaultJwksUrl}(issuer). Ignored when `keySet` is given. */
  readonly jwksUrl?: string;
  /**
   * Allow-list of JWS algorithms. Only asymmetric ones are allowed: `none` and HMAC (`HS*`) are refused
   * at construction, since a verifier holding only public keys must never accept them.
   */
  readonly algorithms?: readonly string[];
  /** Claim naming the organization of a client-credentials token. Default `org_id`. */
  readonly orgClaim?: string;
  /** Claim naming the role of a client-credentials token. Default `role`. */
  readonly roleClaim?: string;
  /**
   * Whether a user token must say `email_verified: true` for its e-mail to count as verified (default
   * true). Turn off only for providers that never send the claim: a missing claim then counts as verified.
   */
  readonly requireEmailVerified?: boolean;
  /**
   * Client ids (`azp` or `client_id`) whose tokens are machine tokens. Tokens with
   * `gty: client-credentials` are machine tokens anyway; no other token is.
   */
  readonly machineClientIds?: readonly string[];
  /** Longest accepted lifetime (`exp - iat`, or `exp - now` without `iat`), in seconds. Default 24 h. */
  readonly maxTokenLifetimeSeconds?: number;
  /** Leeway for `exp`, `nbf` and `iat`, in seconds. Default 5. */
  readonly clockToleranceSeconds?: number;
  /** Minimum time between two JWKS fetches triggered by unknown key ids. Default 30 s. */
  readonly jwksCooldownMs?: number;
  /** Age after which fetched keys are refreshed in the background (still used meanwhile). Default 10 min. */
  readonly jwksCacheMaxAgeMs?: number;
  /** Age after which keys that could not be refreshed are no longer trusted (503). Default 24 h. */
  readonly jwksMaxStaleMs?: number;
  /** Timeout of one JWKS fetch. Default 5 s. */
  readonly jwksTimeoutMs?: number;
  /**
   * Never trust the development identity provider's keys (`@sts/vocabulary/development-provider`): a
   * fetched key set that says it is theirs counts as unavailable (503). The gateway sets it with
   * NODE_ENV=production.
   */
  readonly refuseDevelopmentProvider?: boolean;
  /** Cache of verified tokens; `false` turns it off. */
  readonly cache?: false | { readonly maxEntries?: number; readonly maxAgeMs?: number };
  /** Key resolver to use instead of fetching `jwksUrl` (e.g. jose `createLocalJWKSet`). */
  readonly keySet?: JWTVerifyGetKey;
  /** Clock in epoch milliseconds, shared by the cache and the claim checks. For tests. */
  readonly now?: () => number;
}

/** Variables of `oidcEnv` (`@sts/config/env-fragments`), after parsing. */
export interface OidcEnvConfig {
  readonly OIDC_ISSUER: string;
  readonly OIDC_AUDIENCE: string;
  readonly OIDC_JWKS_URL?: string | undefined;
  readonly OIDC_ORG_CLAIM: string;
  readonly OIDC_ROLE_CLAIM: string;
  readonly OIDC_ALGORITHMS: readonly string[];
  readonly OIDC_REQUIRE_EMAIL_VERIFIED: boolean;
  readonly OIDC_CLIENT_IDS: readonly string[];
  readonly OIDC_MAX_TOKEN_LIFETIME_SECONDS: number;
}

export interface AccessTokenVerifierStats {
  /** Tokens that went through signature and claim checks (cache misses). */
  readonly verifications: number;
  /** Tokens answered from the cache. */
  readonly cacheHits: number;
  /** Entries held now. */
  readonly cacheSize: number;
}

/** `${issuer without trailing slash}/.well-known/jwks.json` */
export function defaultJwksUrl(issuer: string): string {
  return `${issuer.replace(/\/+$/, '')}/.well-known/jwks.json`;
}

export function accessTokenVerifierOptionsFromEnv(env: OidcEnvConfig): AccessTokenVerifierOptions {
  return {
    issuer: env.OIDC_ISSUER,
    audience: env.OIDC_AUDIENCE,
    jwksUrl: env.OIDC_JWKS_URL ?? defaultJwksUrl(env.OIDC_ISSUER),
    orgClaim: env.OIDC_ORG_CLAIM,
    roleClaim: env.OIDC_ROLE_CLAIM,
    algorithms: env.OIDC_ALGORITHMS,
    requireEmailVerified: env.OIDC_REQUIRE_EMAIL_VERIFIED,
    machineClientIds: env.OIDC_CLIENT_IDS,
    maxTokenLifetimeSeconds: env.OIDC_MAX_TOKEN_LIFETIME_SECONDS,
  };
}

/** Longest token accepted; real access tokens are 1–3 KB. Bounds hashing and parsing work. */
const MAX_TOKEN_LENGTH = 16 * 1024;
const BEARER = /^Bearer[ ]+([^ ]+)[ ]*$/i;

/**
 * The token of an `Authorization: Bearer <token>` header value (scheme case-insensitive).
 * @throws AppError UNAUTHENTICATED when the header is missing, repeated, of another scheme or empty.
 */
export function parseBearer(headerValue: string | readonly string[] | undefined | null): string {
  if (headerValue === undefined || headerValue === null || headerValue === '') {
    throw unauthenticated('Missing Authorization header');
  }
  if (typeof headerValue !== 'string') throw unauthenticated('Authorization header must appear once');
  const match = BEARER.exec(headerValue);
  if (!match?.[1]) {
    throw unauthenticated(
      /^Bearer\s*$/i.test(headerValue)
        ? 'Bearer token is empty'
        : 'Authorization header must use the Bearer scheme',
    );
  }
  return match[1];
}

/**
 * Verifies OAuth 2.0 / OIDC bearer access tokens against the identity provider's JWKS and turns them
 * into a {@link Principal}.
 *
 * Rules:
 * - Signature by a key of the JWKS, with an allow-listed asymmetric algorithm; `iss` and `aud` as
 *   configured; `exp` required and not passed, `nbf`/`iat` not in the future (5 s leeway); `sub` required.
 * - Lifetime (`exp - iat`) at most `maxTokenLifetimeSeconds` (24 h by default): a leaked long-lived
 *   token is refused even if the provider issued it.
 * - Machine (client-credentials) token: `gty === 'client-credentials'`, or a client id (`azp` or
 *   `client_id`) on `machineClientIds`; nothing else (an absent `email` does not make a machine).
 *   It must carry the org claim (non-empty string). Its role is the role claim, `ANALYST` when absent;
 *   an unknown role value is refused.
 * - Otherwise a user token. It must carry `email`. `name` falls back to `nickname`, then
 *   `preferred_username`, then the local part of the e-mail. The e-mail counts as verified only when
 *   `email_verified` is true (or, with `requireEmailVerified: false`, when it is absent).
 * - The principal's issuer is the configured one without a trailing slash, so `https://idp/` and
 *   `https://idp` name the same user.
 * - Every refusal is `AppError('UNAUTHENTICATED', reason)` with a reason safe to show. When the JWKS
 *   cannot be fetched (identity provider down) it is `SERVICE_UNAVAILABLE`: the token may well be fine.
 * - Verified tokens are cached (by SHA-256 of the token) until min(`exp`, now + 60 s); failures never are.
 */
export class AccessTokenVerifier {
  private readonly getKey: JWTVerifyGetKey;
  private readonly verifyOptions: JWTVerifyOptions;
  private readonly issuer: string;
  private readonly orgClaim: string;
  private readonly roleClaim: string;
  private readonly requireEmailVerified: boolean;
  private readonly machineClientIds: ReadonlySet<string>;
  private readonly maxTokenLifetimeSeconds: number;
  private readonly now: () => number;
  private readonly cacheMaxAgeMs: number;
  /** Verified principals by SHA-256 of the token, each until min(exp, verified at + maxAgeMs); least recently used go first. */
  private readonly cache: LRUCache<string, Principal> | undefined;
  private readonly inFlight = new Map<string, Promise<Principal>>();
  private verifications = 0;
  private cacheHits = 0;

  constructor(options: AccessTokenVerifierOptions) {
    const algorithms = [...(options.algorithms ?? DEFAULT_ALGORITHMS)];
    if (algorithms.length === 0) throw new Error('AccessTokenVerifier: at least one algorithm is required');
    const refused = algorithms.filter((alg) => alg.toLowerCase() === 'none' || /^HS/i.test(alg));
    if (refused.length > 0) {
      throw new Error(
        `AccessTokenVerifier: algorithms ${refused.join(', ')} cannot be used with a public key set`,
      );
    }
    const issuer = options.issuer.replace(/\/+$/, '');
    this.verifyOptions = {
      issuer: [issuer, `${issuer}/`],
      audience: typeof options.audience === 'string' ? options.audience : [...options.audience],
      algorithms,
      clockTolerance: options.clockToleranceSeconds ?? 5,
      requiredClaims: ['exp', 'sub'],
    };
    this.issuer = issuer;
    this.orgClaim = options.orgClaim ?? 'org_id';
    this.roleClaim = options.roleClaim ?? 'role';
    this.requireEmailVerified = options.requireEmailVerified ?? true;
    this.machineClientIds = new Set(options.machineClientIds ?? []);
    this.maxTokenLifetimeSeconds = options.maxTokenLifetimeSeconds ?? 24 * 3600;
    this.now = options.now ?? Date.now;
    this.cacheMaxAgeMs = (options.cache !== false && options.cache?.maxAgeMs) || 60_000;
    const now = this.now;
    this.cache =
      options.cache === false
        ? undefined
        : new LRUCache<string, Principal>({
            max: options.cache?.maxEntries || 10_000,
            perf: { now },
            ttlResolution: 0,
          });

    if (options.keySet) {
      this.getKey = options.keySet;
    } else {
      this.getKey = new ResilientJwks(new URL(options.jwksUrl ?? defaultJwksUrl(options.issuer)), {
        refreshAfterMs: options.jwksCacheMaxAgeMs ?? 600_000,
        maxStaleMs: options.jwksMaxStaleMs ?? 24 * 3_600_000,
        cooldownMs: options.jwksCooldownMs ?? 30_000,
        maxBackoffMs: 5 * 60_000,
        timeoutMs: options.jwksTimeoutMs ?? 5_000,
        now: this.now,
        refuseDevelopmentKeySet: options.refuseDevelopmentProvider ?? false,
      }).getKey;
    }
  }

  /** Verifies the value of an `Authorization` header. */
  async verifyAuthorizationHeader(
    headerValue: string | readonly string[] | undefined | null,
  ): Promise<Principal> {
    return this.verify(parseBearer(headerValue));
  }

  /** Verifies a bare access token (without the `Bearer ` prefix). */
  verify(token: string): Promise<Principal> {
    if (typeof token !== 'string' || token.length === 0)
      return Promise.reject(unauthenticated('Missing access token'));
    if (token.length > MAX_TOKEN_LENGTH) return Promise.reject(unauthenticated('Access token is too large'));
    if (!this.cache) return this.verifyUncached(token).then(({ principal }) => principal);

    const key = createHash('sha256').update(token).digest('base64');
    const cached = this.cache.get(key);
    if (cached) {
      this.cacheHits += 1;
      return Promise.resolve(cached);
    }
    const pending = this.inFlight.get(key);
    if (pending) return pending;

    const verification = this.verifyUncached(token).then(
      ({ principal, exp }) => {
        this.inFlight.delete(key);
        this.remember(key, principal, exp);
        return principal;
      },
      (error: unknown) => {
        this.inFlight.delete(key);
        throw error;
      },
    );
    this.inFlight.set(key, verification);
    return verification;
  }

  stats(): AccessTokenVerifierStats {
    return { verifications: this.verifications, cacheHits: this.cacheHits, cacheSize: this.cache?.size ?? 0 };
  }

  clearCache(): void {
    this.cache?.clear();
  }

  /** Principals are frozen: one cached object is handed to many requests. */
  private async verifyUncached(token: string): Promise<{ principal: Principal; exp: number }> {
    this.verifications += 1;
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.getKey, {
        ...this.verifyOptions,
        currentDate: new Date(this.now()),
      }));
    } catch (error) {
      throw toAppError(error);
    }
    return { principal: this.toPrincipal(payload), exp: payload.exp as number };
  }

  private remember(key: string, principal: Principal, exp: number): void {
    const now = this.now();
    const ttl = Math.min(exp * 1000, now + this.cacheMaxAgeMs) - now;
    if (ttl > 0) this.cache?.set(key, principal, { ttl });
  }

  private toPrincipal(payload: JWTPayload): Principal {
    const issuer = this.issuer;
    const subject = payload.sub;
    if (typeof subject !== 'string' || subject.length === 0)
      throw unauthenticated('Token has no subject (sub) claim');
    const issuedAt = typeof payload.iat === 'number' ? payload.iat : this.now() / 1000;
    if ((payload.exp as number) - issuedAt > this.maxTokenLifetimeSeconds) {
      throw unauthenticated('Token lifetime is longer than accepted');
    }

    const orgClaim = payload[this.orgClaim];
    const email = payload['email'];
    const clientId = payload['azp'] ?? payload['client_id'];
    const isMachine =
      payload['gty'] === 'client-credentials' ||
      (typeof clientId === 'string' && this.machineClientIds.has(clientId));

    if (isMachine) {
      if (typeof orgClaim !== 'string' || orgClaim.length === 0) {
        throw unauthenticated(`Client token has no organization (${this.orgClaim}) claim`);
      }
      const roleClaim = payload[this.roleClaim];
      let role: Role = 'ANALYST';
      if (roleClaim !== undefined && roleClaim !== null) {
        if (!isRole(roleClaim))
          throw unauthenticated(`Client token has an unknown role (${this.roleClaim}) claim`);
        role = roleClaim;
      }
      return Object.freeze({ kind: 'client', issuer, subject, orgId: orgClaim, role });
    }

    if (typeof email !== 'string' || email.length === 0)
      throw unauthenticated('User token has no email claim');
    const name =
      nonEmptyString(payload['name']) ??
      nonEmptyString(payload['nickname']) ??
      nonEmptyString(payload['preferred_username']) ??
      email.split('@')[0] ??
      email;
    const verified = payload['email_verified'];
    const emailVerified =
      verified === true || verified === 'true' || (!this.requireEmailVerified && verified === undefined);
    return Object.freeze({ kind: 'user', issuer, subject, email, emailVerified, name });
  }
}

function nonEmptyString(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim().length > 0 ? value : undefined;
}

function unauthenticated(reason: string, cause?: unknown): AppError {
  return new AppError('UNAUTHENTICATED', reason, cause === undefined ? {} : { cause });
}

const CLAIM_REASONS: Record<string, string> = {
  aud: 'Token audience is not accepted',
  iss: 'Token issuer is not trusted',
  nbf: 'Token is not yet valid',
  iat: 'Token issue time is invalid',
  exp: 'Token has no valid expiry (exp) claim',
  sub: 'Token has no subject (sub) claim',
};

/** Maps whatever verification threw to an AppError whose detail is safe to show to the caller. */
function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  if (error instanceof KeySetUnavailable) {
    return new AppError('SERVICE_UNAVAILABLE', 'Identity provider keys are unavailable', {
      cause: error.cause,
    });
  }
  if (error instanceof joseErrors.JWTExpired) return unauthenticated('Token has expired', error);
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    return unauthenticated(CLAIM_REASONS[error.claim] ?? `Token claim ${error.claim} is invalid`, error);
  }
  if (error instanceof joseErrors.JOSEAlgNotAllowed || error instanceof joseErrors.JOSENotSupported) {
    return unauthenticated('Token signing algorithm is not allowed', error);
  }
  if (error instanceof joseErrors.JWKSNoMatchingKey)
    return unauthenticated('Token signing key is unknown', error);
  if (
    error instanceof joseErrors.JWSSignatureVerificationFailed ||
    error instanceof joseErrors.JWKSMultipleMatchingKeys
  ) {
    return unauthenticated('Token signature is invalid', error);
  }
  return unauthenticated('Token is malformed', error);
}
