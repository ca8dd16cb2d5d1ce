import type { WindowCounter } from './window-counter';

const WINDOW_MS = 60_000;
const SCOPE = 'enroll-failures';

/**
 * Where a failed enrollment came from: the enrollment key it presented (null: none), the client address
 * as limits count it (`clientAddressKey`: an IPv6 client by its /64) and the network it belongs to
 * (`clientNetworkKey`: IPv4 by /24, IPv6 by /48), by which the key's bookkeeping tells sources apart.
 */
export interface EnrollFailureSource {
  key: string | null;
  address: string;
  network: string;
}

export interface EnrollFailureLimits {
  /** Failures per client address per minute, whatever key they presented; then the address waits. */
  perAddress: number;
  /**
   * Failures per enrollment key per minute, from all networks together. Beyond it the key is not
   * locked for everyone: only networks that have failed with it in this minute wait, so agents
   * enrolling with good codes from elsewhere go on. Beyond {@link HARD_CEILING_FACTOR} times it, every
   * request with the key waits until the minute ends: the hard bound on guesses per key
   * (docs/decisions.md, "Brute force on enrollment codes").
   */
  perKey: number;
}

/**
 * The hard ceiling per key, as a multiple of `perKey`. Between the two, each network that has not failed
 * with the key this minute gets one failure; beyond it, none does. Without it the guesses per key grew
 * with the networks an attacker holds (counted by /64, one IPv6 /48 gave 65,536 a minute); with it, a
 * guesser holding many networks can hold up the key's other enrollments for the rest of a minute, but only
 * with `perKey` fresh networks failing in that minute on top of the first `perKey` failures. Successes
 * never count, so a roll-out never reaches it by itself.
 */
export const HARD_CEILING_FACTOR = 2;

/**
 * Counts failed enrollments (bad key, bad code) in fixed one-minute windows and says when a request
 * must wait. Keeps guessing enrollment codes impractical (at most `HARD_CEILING_FACTOR · perKey` failures
 * per key and minute, however many addresses guess) without letting a few guessers lock an
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

  /**
   * Whether this source must wait: its address failed too often; or the key did and so did this
   * network; or the key reached its hard ceiling.
   */
  async isBlocked({ key, address, network }: EnrollFailureSource): Promise<boolean> {
    const { perAddress, perKey } = this.limits;
    const hardPerKey = HARD_CEILING_FACTOR * perKey;
    const [byAddress, byKey, byPair] = await Promise.all([
      this.counter.read(SCOPE, addressCounter(address), WINDOW_MS, perAddress),
      key === null ? null : this.counter.read(SCOPE, keyCounter(key), WINDOW_MS, hardPerKey),
      key === null ? null : this.counter.read(SCOPE, pairCounter(key, network), WINDOW_MS, 1),
    ]);
    if (byAddress.count >= perAddress) return true;
    if (byKey === null || byPair === null) return false;
    if (byKey.count >= hardPerKey) return true;
    return byKey.count >= perKey && byPair.count >= 1;
  }

  async recordFailure({ key, address, network }: EnrollFailureSource): Promise<void> {
    const { perAddress, perKey } = this.limits;
    await Promise.all([
      this.counter.increment(SCOPE, addressCounter(address), WINDOW_MS, perAddress),
      ...(key === null
        ? []
        : [
            this.counter.increment(SCOPE, keyCounter(key), WINDOW_MS, HARD_CEILING_FACTOR * perKey),
            this.counter.increment(SCOPE, pairCounter(key, network), WINDOW_MS, 1),
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
/** Header values and networks hold no NUL: neither part can forge the separator. */
const pairCounter = (key: string, network: string) => `key-network:${key}\0${network}`;
