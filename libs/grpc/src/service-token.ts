import { jwtVerify, SignJWT } from 'jose';
import type { ServiceName } from '@sts/vocabulary/services';

/**
 * Who may talk to whom inside the system. Every gRPC call carries a short-lived token (JWT, HS256,
 * keyed by SERVICE_AUTH_KEY) naming the calling service (`sub`) and the service it is meant for
 * (`aud`); servers refuse calls without one, with a bad signature, for another audience, expired,
 * or from a service not on their list of callers. docs/decisions.md "Trust between services".
 */

/** gRPC metadata key of the token (HTTP/2 header, lowercase). */
export const SERVICE_TOKEN_METADATA_KEY = 'authorization';

const ISSUER = 'sts-service';
const ALGORITHM = 'HS256';
/** Lifetime of a token; a client mints a new one when less than a third of it is left. */
const TOKEN_LIFETIME_SECONDS = 600;
const REFRESH_WHEN_LEFT_MS = (TOKEN_LIFETIME_SECONDS * 1000) / 3;
/** Clock difference tolerated between services' hosts. */
const CLOCK_TOLERANCE_SECONDS = 30;
const MIN_KEY_BYTES = 32;

function assertKey(key: Uint8Array): void {
  if (key.length < MIN_KEY_BYTES) throw new Error(`SERVICE_AUTH_KEY must be at least ${MIN_KEY_BYTES} bytes`);
}

/** Mints the tokens a service presents to others, one per audience, reused until near expiry. */
export class ServiceTokenIssuer {
  private readonly minted = new Map<ServiceName, { value: string; refreshAtMs: number }>();
  private readonly pending = new Map<ServiceName, Promise<string>>();

  constructor(
    private readonly key: Uint8Array,
    readonly caller: ServiceName,
    private readonly now: () => number = Date.now,
  ) {
    assertKey(key);
  }

  /** The `authorization` value for a call to `audience`: the cached token, or a promise of a new one. */
  tokenFor(audience: ServiceName): string | Promise<string> {
    const cached = this.minted.get(audience);
    if (cached && cached.refreshAtMs > this.now()) return cached.value;
    let minting = this.pending.get(audience);
    if (!minting) {
      minting = this.mint(audience).finally(() => this.pending.delete(audience));
      this.pending.set(audience, minting);
    }
    return minting;
  }

  private async mint(audience: ServiceName): Promise<string> {
    const issuedAtMs = this.now();
    const issuedAt = Math.floor(issuedAtMs / 1000);
    const token = await new SignJWT({})
      .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
      .setIssuer(ISSUER)
      .setSubject(this.caller)
      .setAudience(audience)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + TOKEN_LIFETIME_SECONDS)
      .sign(this.key);
    const value = `Bearer ${token}`;
    this.minted.set(audience, {
      value,
      refreshAtMs: issuedAtMs + TOKEN_LIFETIME_SECONDS * 1000 - REFRESH_WHEN_LEFT_MS,
    });
    return value;
  }
}

export type CallerCheck = { ok: true; caller: ServiceName } | { ok: false; reason: string };

/** How many distinct verified tokens a server remembers (a caller mints one per audience per ~7 min). */
const VERIFIED_CACHE_LIMIT = 1_000;

/**
 * Checks the tokens presented to one service. A verified token is remembered until it expires, so
 * the signature is checked once per token, not once per call.
 */
export class ServiceTokenVerifier {
  private readonly verified = new Map<string, { caller: ServiceName; expiresAtMs: number }>();
  private readonly allowed: ReadonlySet<ServiceName>;

  constructor(
    private readonly key: Uint8Array,
    readonly audience: ServiceName,
    allowedCallers: readonly ServiceName[],
    private readonly now: () => number = Date.now,
  ) {
    assertKey(key);
    this.allowed = new Set(allowedCallers);
  }

  /** Answers at once (no promise) for a token seen before, so the common call pays no await. */
  check(authorization: unknown): CallerCheck | Promise<CallerCheck> {
    if (typeof authorization !== 'string' || !authorization.startsWith('Bearer ')) {
      return { ok: false, reason: 'no service token' };
    }
    const token = authorization.slice('Bearer '.length);
    const known = this.verified.get(token);
    if (known) {
      if (known.expiresAtMs > this.now()) return { ok: true, caller: known.caller };
      this.verified.delete(token);
    }
    return this.verify(token);
  }

  private async verify(token: string): Promise<CallerCheck> {
    let payload;
    try {
      ({ payload } = await jwtVerify(token, this.key, {
        algorithms: [ALGORITHM],
        issuer: ISSUER,
        audience: this.audience,
        requiredClaims: ['sub', 'exp', 'iat'],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        currentDate: new Date(this.now()),
        maxTokenAge: TOKEN_LIFETIME_SECONDS + CLOCK_TOLERANCE_SECONDS,
      }));
    } catch {
      return { ok: false, reason: 'invalid service token' };
    }
    const caller = payload.sub as ServiceName;
    if (!this.allowed.has(caller))
      return { ok: false, reason: `service ${String(payload.sub)} may not call ${this.audience}` };
    if (this.verified.size >= VERIFIED_CACHE_LIMIT) this.verified.clear();
    this.verified.set(token, { caller, expiresAtMs: (payload.exp ?? 0) * 1000 });
    return { ok: true, caller };
  }
}
