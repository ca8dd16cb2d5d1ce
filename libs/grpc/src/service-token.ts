import { randomUUID, type KeyObject } from 'node:crypto';
import { decodeJwt, errors, jwtVerify, SignJWT } from 'jose';
import { LRUCache } from 'lru-cache';
import type { TrustedServiceKeys } from '@sts/config/service-keys';
import type { ServiceName } from '@sts/vocabulary/services';

/**
 * Who may talk to whom inside the system. Every gRPC call carries a short-lived token (JWT, EdDSA)
 * naming the calling service (`sub`) and the service it is meant for (`aud`), signed with the caller's
 * own Ed25519 private key (SERVICE_SIGNING_KEY). A server holds only public keys, by service name
 * (SERVICE_TRUSTED_KEYS), and checks a token with the key of the service it names: a service can speak
 * only for itself. Servers refuse calls without a token, with a signature that key does not verify, for
 * another audience, expired, or from a service not on their list of callers. docs/decisions.md "Trust
 * between services".
 */

/** gRPC metadata key of the token (HTTP/2 header, lowercase). */
export const SERVICE_TOKEN_METADATA_KEY = 'authorization';

const ISSUER = 'sts-service';
const ALGORITHM = 'EdDSA';
/**
 * Lifetime of a token; a client mints a new one when less than a third of it is left (every 80 s per
 * audience). Short, because a token is a bearer credential: one taken from a call works for the rest of its
 * life (and the clock tolerance), wherever it is presented (docs/decisions.md, "Trust between services").
 */
export const TOKEN_LIFETIME_SECONDS = 120;
/**
 * The oldest token accepted (`iat`), above the lifetime: callers of the release before this one minted
 * tokens of 600 s, and during a rolling update they still call. Their `exp` bounds them anyway.
 */
const MAX_TOKEN_AGE_SECONDS = 600;
const REFRESH_WHEN_LEFT_MS = (TOKEN_LIFETIME_SECONDS * 1000) / 3;
/** Clock difference tolerated between services' hosts. */
const CLOCK_TOLERANCE_SECONDS = 30;

function assertEd25519(key: KeyObject, type: 'private' | 'public', what: string): void {
  if (key.type !== type || key.asymmetricKeyType !== 'ed25519')
    throw new Error(`${what} must be an Ed25519 ${type} key`);
}

/** Mints the tokens a service presents to others, one per audience, reused until near expiry. */
export class ServiceTokenIssuer {
  /** The `authorization` value per audience, until a third of its lifetime is left. */
  private readonly minted: LRUCache<ServiceName, string>;
  /** Mints in flight, shared by the calls that need the token meanwhile. */
  private readonly pending = new Map<ServiceName, Promise<string>>();

  constructor(
    /** This process's own private key (SERVICE_SIGNING_KEY). */
    private readonly signingKey: KeyObject,
    readonly caller: ServiceName,
    private readonly now: () => number = Date.now,
  ) {
    assertEd25519(signingKey, 'private', 'SERVICE_SIGNING_KEY');
    this.minted = new LRUCache({
      max: 64,
      ttl: TOKEN_LIFETIME_SECONDS * 1000 - REFRESH_WHEN_LEFT_MS,
      perf: { now },
      ttlResolution: 0,
    });
  }

  /** The `authorization` value for a call to `audience`: the cached token, or a promise of a new one. */
  tokenFor(audience: ServiceName): string | Promise<string> {
    const cached = this.minted.get(audience);
    if (cached !== undefined) return cached;
    let minting = this.pending.get(audience);
    if (!minting) {
      minting = this.mint(audience).finally(() => this.pending.delete(audience));
      this.pending.set(audience, minting);
    }
    return minting;
  }

  private async mint(audience: ServiceName): Promise<string> {
    const issuedAt = Math.floor(this.now() / 1000);
    const token = await new SignJWT({})
      .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
      .setIssuer(ISSUER)
      .setSubject(this.caller)
      .setAudience(audience)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + TOKEN_LIFETIME_SECONDS)
      // Names this one token in logs and traces of the calls it made.
      .setJti(randomUUID())
      .sign(this.signingKey);
    const value = `Bearer ${token}`;
    this.minted.set(audience, value);
    return value;
  }
}

export type CallerCheck = { ok: true; caller: ServiceName } | { ok: false; reason: string };

/** How many distinct verified tokens a server remembers (a caller mints one per audience per 80 s). */
const VERIFIED_CACHE_LIMIT = 1_000;

/**
 * Checks the tokens presented to one service. The token's `sub` names the calling service, and only
 * that service's public keys may verify it: a token signed with notification's key that claims to be
 * the gateway is refused, as is one signed with a key no caller holds. A verified token is remembered
 * until it expires, so the signature is checked once per token, not once per call.
 */
export class ServiceTokenVerifier {
  /** Verified tokens, each until it expires (bounded: the least recently used go first). */
  private readonly verified: LRUCache<string, ServiceName>;
  private readonly allowed: ReadonlySet<ServiceName>;

  constructor(
    /** The callers' public keys by service name (SERVICE_TRUSTED_KEYS); others' are never consulted. */
    private readonly trustedKeys: TrustedServiceKeys,
    readonly audience: ServiceName,
    allowedCallers: readonly ServiceName[],
    private readonly now: () => number = Date.now,
  ) {
    this.allowed = new Set(allowedCallers);
    this.verified = new LRUCache({ max: VERIFIED_CACHE_LIMIT, perf: { now }, ttlResolution: 0 });
    for (const caller of this.allowed) {
      const keys = trustedKeys.get(caller) ?? [];
      if (keys.length === 0)
        throw new Error(`${audience} serves ${caller}, but SERVICE_TRUSTED_KEYS has no key of ${caller}`);
      for (const key of keys) assertEd25519(key, 'public', `SERVICE_TRUSTED_KEYS (${caller})`);
    }
  }

  /** Answers at once (no promise) for a token seen before, so the common call pays no await. */
  check(authorization: unknown): CallerCheck | Promise<CallerCheck> {
    if (typeof authorization !== 'string' || !authorization.startsWith('Bearer ')) {
      return { ok: false, reason: 'no service token' };
    }
    const token = authorization.slice('Bearer '.length);
    const known = this.verified.get(token);
    if (known !== undefined) return { ok: true, caller: known };
    return this.verify(token);
  }

  private async verify(token: string): Promise<CallerCheck> {
    // Who the token says it is, unverified: it only picks the keys that must verify it.
    let claimed: unknown;
    try {
      claimed = decodeJwt(token).sub;
    } catch {
      return { ok: false, reason: 'invalid service token' };
    }
    if (typeof claimed !== 'string' || !this.allowed.has(claimed as ServiceName))
      return { ok: false, reason: `service ${String(claimed).slice(0, 40)} may not call ${this.audience}` };
    const caller = claimed as ServiceName;
    for (const key of this.trustedKeys.get(caller) ?? []) {
      let payload;
      try {
        ({ payload } = await jwtVerify(token, key, {
          algorithms: [ALGORITHM],
          issuer: ISSUER,
          audience: this.audience,
          subject: caller,
          requiredClaims: ['sub', 'exp', 'iat'],
          clockTolerance: CLOCK_TOLERANCE_SECONDS,
          currentDate: new Date(this.now()),
          maxTokenAge: MAX_TOKEN_AGE_SECONDS + CLOCK_TOLERANCE_SECONDS,
        }));
      } catch (error) {
        // Another key of the caller's may have signed it (a rotation); any other fault is final.
        if (error instanceof errors.JWSSignatureVerificationFailed) continue;
        return { ok: false, reason: `invalid service token of ${caller} (${jwtFault(error)})` };
      }
      // Remembered until it expires (one accepted within the clock tolerance after is not remembered).
      const leftMs = (payload.exp ?? 0) * 1000 - this.now();
      if (leftMs > 0) this.verified.set(token, caller, { ttl: leftMs });
      return { ok: true, caller };
    }
    return { ok: false, reason: `invalid service token (not verified by a key of ${caller})` };
  }
}

function jwtFault(error: unknown): string {
  return error instanceof errors.JOSEError ? error.code : 'malformed';
}
