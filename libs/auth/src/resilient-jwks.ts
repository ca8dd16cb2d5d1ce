import { createLocalJWKSet, errors as joseErrors, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { isDevelopmentKeySet } from '@sts/vocabulary/development-provider';

export interface ResilientJwksOptions {
  /** After this age the key set is refreshed in the background while it goes on being used. */
  readonly refreshAfterMs: number;
  /** After this age without a successful refresh the key set is no longer trusted (tokens get 503). */
  readonly maxStaleMs: number;
  /** Least time between fetches for an unknown key id, and the first back-off step after a failure. */
  readonly cooldownMs: number;
  /** Longest back-off between failed fetches. */
  readonly maxBackoffMs: number;
  readonly timeoutMs: number;
  readonly now: () => number;
  /** Never trust the development provider's key set (NODE_ENV=production): fetching it fails. */
  readonly refuseDevelopmentKeySet?: boolean;
}

/** The key set could not be had at all (never fetched, or too old): not the token's fault. */
export class KeySetUnavailable extends Error {}

/**
 * The identity provider's JWKS, fetched over HTTP, that survives the provider being away.
 *
 * Why not jose's `createRemoteJWKSet` alone: once its cache age passes it refetches on the next
 * verification and fails it when the fetch fails, so an identity-provider outage longer than the cache
 * age takes every request down. Here the last good set keeps serving (up to `maxStaleMs`) while
 * refreshes run in the background; failed fetches back off exponentially (from `cooldownMs` to
 * `maxBackoffMs`), so an outage costs the provider one request per back-off step, not one per call.
 * Key lookup and algorithm checks stay jose's (`createLocalJWKSet`).
 */
export class ResilientJwks {
  private current: { getKey: JWTVerifyGetKey; fetchedAt: number } | undefined;
  private fetching: Promise<void> | undefined;
  private lastAttemptAt = Number.NEGATIVE_INFINITY;
  private failures = 0;
  private fetches = 0;

  constructor(
    private readonly url: URL,
    private readonly options: ResilientJwksOptions,
  ) {}

  /** For jose's `jwtVerify`. */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    const now = this.options.now();
    if (!this.current || now - this.current.fetchedAt > this.options.maxStaleMs) {
      await this.refresh(true);
    } else if (now - this.current.fetchedAt > this.options.refreshAfterMs && this.mayFetch(now)) {
      void this.refresh(false).catch(() => undefined);
    }
    const current = this.current;
    if (!current || now - current.fetchedAt > this.options.maxStaleMs) {
      throw new KeySetUnavailable('the identity provider key set is unavailable');
    }
    try {
      return await current.getKey(header, token);
    } catch (error) {
      // A key id we do not know may be a rotation: look again, at most once per cooldown.
      if (!(error instanceof joseErrors.JWKSNoMatchingKey) || !this.mayFetch(now)) throw error;
      await this.refresh(false).catch(() => undefined);
      if (this.current === current) throw error;
      return this.current!.getKey(header, token);
    }
  };

  /** Fetches made so far (tests and diagnostics). */
  get fetchCount(): number {
    return this.fetches;
  }

  private mayFetch(now: number): boolean {
    const backoff = Math.min(
      this.options.cooldownMs * 2 ** Math.max(this.failures - 1, 0),
      this.options.maxBackoffMs,
    );
    return now - this.lastAttemptAt >= (this.failures > 0 ? backoff : this.options.cooldownMs);
  }

  /** One fetch at a time; `required` callers (no usable set) wait for it even inside the back-off. */
  private refresh(required: boolean): Promise<void> {
    if (this.fetching) return this.fetching;
    if (!required && !this.mayFetch(this.options.now())) return Promise.resolve();
    if (required && !this.mayFetch(this.options.now()) && this.failures > 0) {
      return Promise.reject(
        new KeySetUnavailable('the identity provider key set is unavailable (backing off)'),
      );
    }
    this.lastAttemptAt = this.options.now();
    this.fetches += 1;
    this.fetching = this.fetchKeySet()
      .then(
        (keys) => {
          this.current = { getKey: createLocalJWKSet(keys), fetchedAt: this.options.now() };
          this.failures = 0;
        },
        (error: unknown) => {
          this.failures += 1;
          throw new KeySetUnavailable('the identity provider key set could not be fetched', { cause: error });
        },
      )
      .finally(() => {
        this.fetching = undefined;
      });
    return this.fetching;
  }

  private async fetchKeySet(): Promise<JSONWebKeySet> {
    const response = await fetch(this.url, {
      headers: { accept: 'application/json' },
      redirect: 'manual',
      signal: AbortSignal.timeout(this.options.timeoutMs),
    });
    if (response.status !== 200) throw new Error(`JWKS answered HTTP ${response.status}`);
    const body: unknown = await response.json();
    if (!isKeySet(body)) throw new Error('JWKS response is not a JSON Web Key Set');
    if (this.options.refuseDevelopmentKeySet && isDevelopmentKeySet(body))
      throw new Error("JWKS is the development identity provider's, refused with NODE_ENV=production");
    return body;
  }
}

function isKeySet(value: unknown): value is JSONWebKeySet {
  return (
    typeof value === 'object' &&
    value !== null &&
    Array.isArray((value as { keys?: unknown }).keys) &&
    (value as { keys: unknown[] }).keys.every((key) => typeof key === 'object' && key !== null)
  );
}
