import { TtlCache } from './ttl-cache';

describe('TtlCache', () => {
  it('expires entries, stays bounded, and can be disabled', () => {
    let now = 0;
    const cache = new TtlCache<string>(1_000, 2, () => now);
    cache.set('a', 'A');
    expect(cache.get('a')).toBe('A');
    now = 999;
    expect(cache.get('a')).toBe('A');
    now = 1_000;
    expect(cache.get('a')).toBeUndefined();
    cache.set('b', 'B');
    cache.set('c', 'C');
    cache.set('d', 'D');
    expect([cache.get('b'), cache.get('c'), cache.get('d')].filter(Boolean)).toEqual(['D']);
    cache.deleteWhere((value) => value === 'D');
    expect(cache.get('d')).toBeUndefined();

    const off = new TtlCache<string>(0);
    off.set('x', 'X');
    expect(off.get('x')).toBeUndefined();
  });
});
