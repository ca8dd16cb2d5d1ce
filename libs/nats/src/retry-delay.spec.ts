import { retryDelayMs } from './retry-delay';

describe('retryDelayMs', () => {
  const policy = { initialMs: 1_000, maxMs: 30_000 };

  it.each([
    // delivery, random, wait: the nominal delay doubles per delivery up to the maximum; jitter spans 0.8–1.2 ×.
    [1, 0.5, 1_000],
    [1, 0, 800],
    [1, 1, 1_200],
    [2, 0.5, 2_000],
    [3, 0.5, 4_000],
    [5, 0.5, 16_000],
    [6, 0.5, 30_000],
    [6, 0, 24_000],
    [6, 1, 36_000],
    [1_000, 0.5, 30_000],
    // A first delivery reported as 0 waits as the first.
    [0, 0.5, 1_000],
    [2, 0.25, 1_800],
  ])('after delivery %i with random %d waits %i ms', (delivery, random, wait) => {
    expect(retryDelayMs(delivery, policy, () => random)).toBe(wait);
  });

  it('varies with Math.random by default, within ±20%', () => {
    const waits = Array.from({ length: 200 }, () => retryDelayMs(1, policy));
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(800);
    expect(Math.max(...waits)).toBeLessThanOrEqual(1_200);
    expect(new Set(waits).size).toBeGreaterThan(10);
  });
});
