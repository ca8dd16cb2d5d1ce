import { FailureLimiter } from './failure-limiter';

describe('FailureLimiter', () => {
  it('blocks a key after the limit within a window and forgets at the next window', () => {
    let now = 120_000;
    const limiter = new FailureLimiter(3, () => now);
    expect(limiter.isBlocked('key-a')).toBe(false);
    limiter.recordFailure('key-a', 'ip-1');
    limiter.recordFailure('key-a', 'ip-2');
    expect(limiter.isBlocked('key-a')).toBe(false);
    limiter.recordFailure('key-a', 'ip-3');
    expect(limiter.isBlocked('key-a')).toBe(true);
    expect(limiter.isBlocked('key-b', 'ip-1')).toBe(false);
    expect(limiter.isBlocked('key-b', 'key-a')).toBe(true);
    expect(limiter.retryAfterSeconds()).toBe(60);
    now += 60_000;
    expect(limiter.isBlocked('key-a')).toBe(false);
  });
});
