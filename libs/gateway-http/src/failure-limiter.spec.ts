import { FailureLimiter } from './failure-limiter';
import { LocalWindowCounter } from './window-counter';

describe('FailureLimiter', () => {
  it('blocks a key after the limit within a window and forgets at the next window', async () => {
    let now = 120_000;
    const limiter = new FailureLimiter(new LocalWindowCounter(() => now), 3, () => now);
    expect(await limiter.isBlocked('key-a')).toBe(false);
    await limiter.recordFailure('key-a', 'ip-1');
    await limiter.recordFailure('key-a', 'ip-2');
    expect(await limiter.isBlocked('key-a')).toBe(false);
    await limiter.recordFailure('key-a', 'ip-3');
    expect(await limiter.isBlocked('key-a')).toBe(true);
    expect(await limiter.isBlocked('key-b', 'ip-1')).toBe(false);
    expect(await limiter.isBlocked('key-b', 'key-a')).toBe(true);
    expect(limiter.retryAfterSeconds()).toBe(60);
    now += 60_000;
    expect(await limiter.isBlocked('key-a')).toBe(false);
  });
});
