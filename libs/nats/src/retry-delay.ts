/** How long a failed message waits before its next delivery: doubling per delivery, up to a maximum. */
export interface RetryDelayPolicy {
  initialMs: number;
  maxMs: number;
}

/**
 * The wait before delivery `deliveryCount + 1`: `initialMs` after the first, doubled after each one
 * more, capped at `maxMs`, with ±20% jitter so that messages that failed together do not all come
 * back together.
 */
export function retryDelayMs(
  deliveryCount: number,
  policy: RetryDelayPolicy,
  random: () => number = Math.random,
): number {
  const exponential = policy.initialMs * 2 ** Math.min(Math.max(deliveryCount - 1, 0), 30);
  return Math.round(Math.min(exponential, policy.maxMs) * (0.8 + random() * 0.4));
}
