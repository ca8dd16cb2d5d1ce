import { clientAddressKey, clientNetworkKey } from './client-address';
import { EnrollFailureLimiter, type EnrollFailureSource } from './enroll-failure-limiter';
import { RateLimiter } from './rate-limiter';
import { LocalWindowCounter } from './window-counter';

describe('EnrollFailureLimiter', () => {
  let now: number;
  let limiter: EnrollFailureLimiter;

  beforeEach(() => {
    now = 120_000;
    limiter = new EnrollFailureLimiter(new RateLimiter(new LocalWindowCounter(() => now)), {
      perAddress: 20,
      perKey: 200,
    });
  });

  const blocked = async (source: EnrollFailureSource) => (await limiter.check(source)).over;

  const from = (ip: string, key: string | null = 'sts_ek_a'): EnrollFailureSource => ({
    key,
    address: clientAddressKey(ip),
    network: clientNetworkKey(ip),
  });

  /** A guesser's minute: each address guesses until it must wait; returns the guesses that got an answer. */
  const guess = async (ips: string[], key = 'sts_ek_a'): Promise<number> => {
    let answered = 0;
    for (const ip of ips) {
      while (!(await blocked(from(ip, key)))) {
        await limiter.recordFailure(from(ip, key));
        answered += 1;
      }
    }
    return answered;
  };

  const v4 = (n: number, host = 1) => `10.${Math.floor(n / 256)}.${n % 256}.${host}`;
  const v6 = (slash48: number, slash64: number) =>
    `2001:db8:${slash48.toString(16)}:${slash64.toString(16)}::1`;

  it('bounds the guesses per key and minute by twice its ceiling, however many /64s and /24s guess (issue 26 review)', async () => {
    // 4,096 /64s of one IPv6 /48, then 1,000 IPv4 /24s: counted by /64 with one try per fresh address past
    // the ceiling, that was 200 + 5,096 guesses in this minute.
    const slash64s = Array.from({ length: 4_096 }, (_, i) => v6(1, i));
    const slash24s = Array.from({ length: 1_000 }, (_, i) => v4(i));
    expect(await guess([...slash64s, ...slash24s])).toBe(400);
    // Past the hard ceiling no network gets an answer with this key, not even one that never failed...
    expect(await blocked(from('192.0.2.1'))).toBe(true);
    expect(await blocked(from('2001:db8:ffff::1'))).toBe(true);
    // ...while other keys are not concerned, and the next minute starts afresh.
    expect(await blocked(from('192.0.2.1', 'sts_ek_b'))).toBe(false);
    now += 60_000;
    expect(await blocked(from('192.0.2.1'))).toBe(false);
  });

  it('past the first ceiling, gives each network one failure: all /64s of a /48, all addresses of a /24', async () => {
    // 200 failures from 10 IPv4 addresses of 10.0.0.0/24: each address 20, the key at its ceiling.
    expect(await guess(Array.from({ length: 10 }, (_, i) => v4(0, i + 1)))).toBe(200);
    // Every address of that /24 waits now, also ones that never failed.
    expect(await blocked(from(v4(0, 200)))).toBe(true);
    // A fresh /48 gets one failure, whatever /64s of it guess; so does a fresh /24, whatever addresses.
    expect(await guess(Array.from({ length: 50 }, (_, i) => v6(7, i)))).toBe(1);
    expect(await guess(Array.from({ length: 50 }, (_, i) => v4(1, i + 1)))).toBe(1);
    // A network that has not failed with the key goes on (its agents' good codes are not held up).
    expect(await blocked(from(v4(2)))).toBe(false);
    expect(await blocked(from(v6(8, 0)))).toBe(false);
    // Mapped IPv4 is the same /24.
    expect(await blocked(from('::ffff:10.0.1.77'))).toBe(true);
  });

  it('limits each address by itself, whatever key it presents, and keeps an IPv6 client to its /64 there', async () => {
    expect(await guess([v6(9, 0)], 'sts_ek_x')).toBe(20);
    expect(await blocked(from('2001:db8:9:0:ffff::2', 'sts_ek_y'))).toBe(true);
    // Another /64 of the same /48 has its own allowance per address (the key is far from its ceiling).
    expect(await blocked(from(v6(9, 1), 'sts_ek_x'))).toBe(false);
    // Requests without a key count against their address only.
    for (let i = 0; i < 20; i++) await limiter.recordFailure(from(v4(3), null));
    expect(await blocked(from(v4(3), null))).toBe(true);
    expect(await blocked(from(v4(3, 2), 'sts_ek_x'))).toBe(false);
  });
});
