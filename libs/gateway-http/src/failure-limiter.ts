import { createHash } from 'node:crypto';

/**
 * Counts failures per key in fixed one-minute windows and says when a key has had too many.
 * Used to make guessing enrollment codes impractical (see docs/decisions.md for the arithmetic).
 * Keys are hashed, so secrets never sit in memory as map keys. Memory is bounded: a window's
 * counters are dropped when the next window starts.
 *
 * Written here rather than taken from @fastify/rate-limit because that plugin counts every request,
 * and mass roll-outs must not be slowed by successful enrollments.
 */
export class FailureLimiter {
  private window = -1;
  private counts = new Map<string, number>();

  constructor(
    private readonly maxFailuresPerMinute: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether any of the keys has reached its limit in the current window. */
  isBlocked(...keys: string[]): boolean {
    this.roll();
    return keys.some((key) => (this.counts.get(digest(key)) ?? 0) >= this.maxFailuresPerMinute);
  }

  recordFailure(...keys: string[]): void {
    this.roll();
    for (const key of keys) {
      const id = digest(key);
      this.counts.set(id, (this.counts.get(id) ?? 0) + 1);
    }
  }

  /** Seconds until the current window ends. */
  retryAfterSeconds(): number {
    return Math.max(1, Math.ceil((60_000 - (this.now() % 60_000)) / 1000));
  }

  private roll(): void {
    const window = Math.floor(this.now() / 60_000);
    if (window !== this.window) {
      this.window = window;
      this.counts = new Map();
    }
  }
}

function digest(key: string): string {
  return createHash('sha256').update(key).digest('base64url');
}
