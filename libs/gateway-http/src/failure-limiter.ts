import type { WindowCounter } from './window-counter';

const WINDOW_MS = 60_000;
const SCOPE = 'enroll-failures';

/**
 * Counts failures per key in fixed one-minute windows and says when a key has had too many.
 * Used to make guessing enrollment codes impractical (see docs/decisions.md for the arithmetic).
 * The counts live in a WindowCounter shared by the gateway replicas, which keeps only hashes of the
 * keys (they hold enrollment keys and addresses).
 *
 * Written here rather than taken from @fastify/rate-limit because that plugin counts every request,
 * and mass roll-outs must not be slowed by successful enrollments.
 */
export class FailureLimiter {
  constructor(
    private readonly counter: WindowCounter,
    private readonly maxFailuresPerMinute: number,
    private readonly now: () => number = Date.now,
    /** What is counted (a WindowCounter scope), so that limiters of different failures count apart. */
    private readonly scope: string = SCOPE,
  ) {}

  /** Whether any of the keys has reached its limit in the current window. */
  async isBlocked(...keys: string[]): Promise<boolean> {
    const counts = await Promise.all(
      keys.map((key) => this.counter.read(this.scope, key, WINDOW_MS, this.maxFailuresPerMinute)),
    );
    return counts.some(({ count }) => count >= this.maxFailuresPerMinute);
  }

  async recordFailure(...keys: string[]): Promise<void> {
    await Promise.all(
      keys.map((key) => this.counter.increment(this.scope, key, WINDOW_MS, this.maxFailuresPerMinute)),
    );
  }

  /** Seconds until the current window ends. */
  retryAfterSeconds(): number {
    return Math.max(1, Math.ceil((WINDOW_MS - (this.now() % WINDOW_MS)) / 1000));
  }
}
