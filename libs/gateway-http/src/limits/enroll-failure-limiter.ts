import type { Limit, LimitVerdict, RateLimiter } from './rate-limiter';

/** The counter scope of every enrollment failure count (per address, per key, per key and network). */
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
 * Counts failed enrollments (bad key, bad code) and says when a request must wait. Keeps guessing
 * enrollment codes impractical (at most `HARD_CEILING_FACTOR · perKey` failures per key and minute,
 * however many addresses guess) without letting a few guessers lock an organization's key for its
 * legitimate agents: locking the whole key after twenty bad codes a minute was a denial of service on
 * the organization's enrollments (issue 26). Three limits of the gateway's RateLimiter, on failures
 * only (successes never count, so mass roll-outs are not slowed): per address, per key, and per key and
 * network.
 */
export class EnrollFailureLimiter {
  private readonly perAddress: Limit;
  private readonly perKey: Limit;
  private readonly perKeyNetwork: Limit;
  private readonly softPerKey: number;

  constructor(
    private readonly limiter: RateLimiter,
    limits: EnrollFailureLimits,
  ) {
    this.perAddress = { scope: SCOPE, max: limits.perAddress };
    // Counted up to the hard ceiling; past the soft one, networks that failed with the key wait.
    this.perKey = { scope: SCOPE, max: HARD_CEILING_FACTOR * limits.perKey };
    this.perKeyNetwork = { scope: SCOPE, max: 1 };
    this.softPerKey = limits.perKey;
  }

  /**
   * Whether this source must wait (`over`, and until when): its address failed too often; or the key
   * did and so did this network; or the key reached its hard ceiling.
   */
  async check({ key, address, network }: EnrollFailureSource): Promise<LimitVerdict> {
    const [byAddress, byKey, byPair] = await Promise.all([
      this.limiter.check(this.perAddress, addressCounter(address)),
      key === null ? null : this.limiter.check(this.perKey, keyCounter(key)),
      key === null ? null : this.limiter.check(this.perKeyNetwork, pairCounter(key, network)),
    ]);
    if (byAddress.over || byKey === null || byPair === null) return byAddress;
    if (byKey.over) return byKey;
    return { ...byKey, over: byKey.count >= this.softPerKey && byPair.over };
  }

  async recordFailure({ key, address, network }: EnrollFailureSource): Promise<void> {
    await Promise.all([
      this.limiter.record(this.perAddress, addressCounter(address)),
      ...(key === null
        ? []
        : [
            this.limiter.record(this.perKey, keyCounter(key)),
            this.limiter.record(this.perKeyNetwork, pairCounter(key, network)),
          ]),
    ]);
  }
}

const addressCounter = (address: string) => `address:${address}`;
const keyCounter = (key: string) => `key:${key}`;
/** Header values and networks hold no NUL: neither part can forge the separator. */
const pairCounter = (key: string, network: string) => `key-network:${key}\0${network}`;
