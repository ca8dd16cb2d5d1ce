import type { WindowCounter } from './window-counter';

const WINDOW_MS = 60_000;
const SCOPE = 'enroll-failures';

/**
 * Where a failed enrollment came from: the enrollment key it presented (null: none) and the client
 * address as limits count it (`clientAddressKey`: an IPv6 client by its /64).
 */
export interface EnrollFailureSource {
  key: string | null;
  address: string;
}

export interface EnrollFailureLimits {
  /** Failures per client address per minute, whatever key they presented; then the address waits. */
  perAddress: number;
  /**
   * Failures per enrollment key per minute, from all addresses together. Beyond it the key is not
   * locked for everyone: only addresses that have failed with it in this minute wait, so agents
   * enrolling with good codes from elsewhere go on (docs/decisions.md, "Brute force on enrollment codes").
   */
  perKey: number;
}

/**
 * Counts failed enrollments (bad key, bad code) in fixed one-minute windows and says when a request
 * must wait. Keeps guessing enrollment codes impractical without letting a guesser lock an
 * organization's key for its legitimate agents: locking the whole key after twenty bad codes a minute
 * was a denial of service on the organization's enrollments (issue 26). The counts live in a
 * WindowCounter shared by the gateway replicas, which keeps only hashes of the keys (they hold
 * enrollment keys and addresses).
 *
 * Written here rather than taken from @fastify/rate-limit because that plugin counts every request,
 * and mass roll-outs must not be slowed by successful enrollments.
 */
export class EnrollFailureLimiter {
  constructor(
    private readonly counter: WindowCounter,
    private readonly limits: EnrollFailureLimits,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether this source must wait: its address failed too often, or the key did and so did this address. */
  async isBlocked({ key, address }: EnrollFailureSource): Promise<boolean> {
    const { perAddress, perKey } = this.limits;
    const [byAddress, byKey, byPair] = await Promise.all([
      this.counter.read(SCOPE, addressCounter(address), WINDOW_MS, perAddress),
      key === null ? null : this.counter.read(SCOPE, keyCounter(key), WINDOW_MS, perKey),
      key === null ? null : this.counter.read(SCOPE, pairCounter(key, address), WINDOW_MS, 1),
    ]);
    if (byAddress.count >= perAddress) return true;
    return byKey !== null && byPair !== null && byKey.count >= perKey && byPair.count >= 1;
  }

  async recordFailure({ key, address }: EnrollFailureSource): Promise<void> {
    const { perAddress, perKey } = this.limits;
    await Promise.all([
      this.counter.increment(SCOPE, addressCounter(address), WINDOW_MS, perAddress),
      ...(key === null
        ? []
        : [
            this.counter.increment(SCOPE, keyCounter(key), WINDOW_MS, perKey),
            this.counter.increment(SCOPE, pairCounter(key, address), WINDOW_MS, 1),
          ]),
    ]);
  }

  /** Seconds until the current window ends. */
  retryAfterSeconds(): number {
    return Math.max(1, Math.ceil((WINDOW_MS - (this.now() % WINDOW_MS)) / 1000));
  }
}

const addressCounter = (address: string) => `address:${address}`;
const keyCounter = (key: string) => `key:${key}`;
/** Header values and addresses hold no NUL: neither part can forge the separator. */
const pairCounter = (key: string, address: string) => `key-address:${key}\0${address}`;
