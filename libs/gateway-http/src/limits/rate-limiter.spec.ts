import { AppError } from '@sts/errors/app-error';
import { RateLimitExceeded, RateLimiter, retryAfterSeconds } from './rate-limiter';
import { LocalWindowCounter } from './window-counter';

describe('RateLimiter', () => {
  let now: number;
  let limiter: RateLimiter;

  beforeEach(() => {
    now = 120_000 + 15_000;
    limiter = new RateLimiter(new LocalWindowCounter(() => now));
  });

  it('charges requests (or bytes) per key and window: over once past max, until the window ends', async () => {
    const limit = { scope: 'requests', max: 2 };
    expect(await limiter.charge(limit, 'a')).toEqual({ over: false, count: 1, resetInMs: 45_000 });
    expect((await limiter.charge(limit, 'a')).over).toBe(false);
    expect(await limiter.charge(limit, 'a')).toEqual({ over: true, count: 3, resetInMs: 45_000 });
    expect((await limiter.charge(limit, 'b')).over).toBe(false);
    expect((await limiter.charge({ scope: 'other', max: 2 }, 'a')).over).toBe(false);
    const bytes = { scope: 'bytes', max: 1_000 };
    expect((await limiter.charge(bytes, 'org', 1_000)).over).toBe(false);
    expect((await limiter.charge(bytes, 'org', 1)).over).toBe(true);
    now += 45_000;
    expect((await limiter.charge(limit, 'a')).over).toBe(false);
  });

  it('checks failures without counting, and is over once `max` were recorded in the window', async () => {
    const limit = { scope: 'failures', max: 3 };
    expect((await limiter.check(limit, 'key-a')).over).toBe(false);
    await limiter.record(limit, 'key-a');
    await limiter.record(limit, 'key-a');
    expect(await limiter.check(limit, 'key-a')).toEqual({ over: false, count: 2, resetInMs: 45_000 });
    await limiter.record(limit, 'key-a');
    expect((await limiter.check(limit, 'key-a')).over).toBe(true);
    expect((await limiter.check(limit, 'key-b')).over).toBe(false);
    now += 45_000;
    expect((await limiter.check(limit, 'key-a')).over).toBe(false);
  });

  it('answers every limit with the same 429 RATE_LIMITED and the whole seconds left in the window', () => {
    const exceeded = new RateLimitExceeded(29_001, (seconds) => `retry in ${seconds} s`);
    expect(exceeded).toBeInstanceOf(AppError);
    expect([exceeded.code, exceeded.httpStatus, exceeded.detail]).toEqual([
      'RATE_LIMITED',
      429,
      'retry in 30 s',
    ]);
    expect(exceeded.retryAfterSeconds).toBe(30);
    expect(retryAfterSeconds(1)).toBe(1);
    expect(retryAfterSeconds(60_000)).toBe(60);
  });
});
