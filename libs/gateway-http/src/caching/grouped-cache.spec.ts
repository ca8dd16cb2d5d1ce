import { GroupedCache } from './grouped-cache';

/** A promise and the functions that settle it, so a test decides when a load finishes. */
function deferred<Value>() {
  let resolve!: (value: Value) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<Value>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A clock reading far from 0 (lru-cache takes a start time of 0 for "no TTL"). */
const START = 1_700_000_000_000;

describe('GroupedCache', () => {
  it('expires entries, stays bounded (least recently used first), and can be disabled', () => {
    let now = START;
    const cache = new GroupedCache<string>(1_000, { maxEntries: 2, now: () => now });
    cache.set('a', 'A');
    expect(cache.get('a')).toBe('A');
    now = START + 1_000;
    expect(cache.get('a')).toBe('A');
    now = START + 1_001;
    expect(cache.get('a')).toBeUndefined();
    cache.set('b', 'B');
    cache.set('c', 'C');
    expect(cache.get('b')).toBe('B');
    cache.set('d', 'D');
    expect([cache.get('b'), cache.get('c'), cache.get('d')]).toEqual(['B', undefined, 'D']);
    cache.delete('d');
    expect(cache.get('d')).toBeUndefined();

    const off = new GroupedCache<string>(0);
    off.set('x', 'X');
    expect(off.get('x')).toBeUndefined();
  });

  describe('getOrLoad', () => {
    it('loads on a miss, reuses the value for the TTL from when the load finished, then loads again', async () => {
      let now = START;
      const cache = new GroupedCache<string>(1_000, { now: () => now });
      let loads = 0;
      const load = jest.fn(async () => `v${++loads}`);

      expect(await cache.getOrLoad('k', load)).toBe('v1');
      now = START + 1_000;
      expect(await cache.getOrLoad('k', load)).toBe('v1');
      now = START + 1_001;
      expect(await cache.getOrLoad('k', load)).toBe('v2');
      expect(await cache.getOrLoad('other', load)).toBe('v3');
      expect(load).toHaveBeenCalledTimes(3);
    });

    it('shares one load among concurrent misses of a key', async () => {
      const cache = new GroupedCache<string>(1_000);
      const upstream = deferred<string>();
      const load = jest.fn(() => upstream.promise);

      const waiting = [cache.getOrLoad('k', load), cache.getOrLoad('k', load), cache.getOrLoad('k', load)];
      upstream.resolve('V');
      expect(await Promise.all(waiting)).toEqual(['V', 'V', 'V']);
      expect(await cache.getOrLoad('k', load)).toBe('V');
      expect(load).toHaveBeenCalledTimes(1);
    });

    it('does not keep a failed load: its waiters share the error, the next miss loads again', async () => {
      const cache = new GroupedCache<string>(1_000);
      const failing = deferred<string>();
      const first = jest.fn(() => failing.promise);

      const waiting = [cache.getOrLoad('k', first), cache.getOrLoad('k', first)];
      failing.reject(new Error('upstream down'));
      for (const result of await Promise.allSettled(waiting)) {
        expect(result).toEqual({ status: 'rejected', reason: new Error('upstream down') });
      }
      expect(first).toHaveBeenCalledTimes(1);
      expect(await cache.getOrLoad('k', async () => 'V')).toBe('V');
      expect(cache.get('k')).toBe('V');
    });

    it('calls the load every time when the TTL is 0', async () => {
      const cache = new GroupedCache<string>(0);
      const upstream = deferred<string>();
      const load = jest.fn(() => upstream.promise);

      const waiting = [cache.getOrLoad('k', load), cache.getOrLoad('k', load)];
      upstream.resolve('V');
      expect(await Promise.all(waiting)).toEqual(['V', 'V']);
      expect(load).toHaveBeenCalledTimes(2);
      expect(cache.get('k')).toBeUndefined();
    });

    it.each([['deleteGroup', (cache: GroupedCache<string>) => cache.deleteGroup('unrelated')]])(
      'does not store a load that was in flight during %s: it may predate the change',
      async (_name, evict) => {
        const cache = new GroupedCache<string>(1_000);
        const stale = deferred<string>();
        const fresh = deferred<string>();

        const before = cache.getOrLoad('k', () => stale.promise);
        evict(cache);
        // A miss after the eviction does not join the stale load...
        const after = cache.getOrLoad('k', () => fresh.promise);
        // ...and the stale load, finishing last, neither overwrites nor drops the fresh one.
        fresh.resolve('fresh');
        expect(await after).toBe('fresh');
        stale.resolve('stale');
        expect(await before).toBe('stale');
        expect(cache.get('k')).toBe('fresh');
        expect(await cache.getOrLoad('k', async () => 'unused')).toBe('fresh');

        // Evicted while the only load is in flight: nothing is stored, the next miss loads.
        const lone = deferred<string>();
        const pending = cache.getOrLoad('lone', () => lone.promise);
        evict(cache);
        lone.resolve('old');
        expect(await pending).toBe('old');
        expect(cache.get('lone')).toBeUndefined();
        expect(await cache.getOrLoad('lone', async () => 'new')).toBe('new');
      },
    );
  });

  describe('groups', () => {
    const people = () =>
      new GroupedCache<{ user: string; org: string }>(1_000, {
        groupsOf: (_key, value) => [`user:${value.user}`, `org:${value.org}`],
      });

    it('evicts every entry of a group, and only those', () => {
      const cache = people();
      cache.set('ada@acme', { user: 'ada', org: 'acme' });
      cache.set('ada@beta', { user: 'ada', org: 'beta' });
      cache.set('bob@acme', { user: 'bob', org: 'acme' });
      cache.set('cy@beta', { user: 'cy', org: 'beta' });

      cache.deleteGroup('user:ada');
      expect([cache.get('ada@acme'), cache.get('ada@beta')]).toEqual([undefined, undefined]);
      expect(cache.get('bob@acme')).toBeDefined();
      cache.deleteGroup('org:acme');
      expect(cache.get('bob@acme')).toBeUndefined();
      expect(cache.get('cy@beta')).toEqual({ user: 'cy', org: 'beta' });
      cache.deleteGroup('nobody');
      expect(cache.get('cy@beta')).toBeDefined();
    });

    it('follows an entry that is replaced, expires or is evicted for room', () => {
      let now = START;
      const cache = new GroupedCache<{ user: string; org: string }>(1_000, {
        maxEntries: 2,
        now: () => now,
        groupsOf: (_key, value) => [`user:${value.user}`, `org:${value.org}`],
      });
      cache.set('k', { user: 'ada', org: 'acme' });
      cache.set('k', { user: 'ada', org: 'beta' });
      cache.deleteGroup('org:acme');
      expect(cache.get('k')).toEqual({ user: 'ada', org: 'beta' });

      now = START + 1_001;
      expect(cache.get('k')).toBeUndefined();
      cache.set('k', { user: 'bob', org: 'beta' });
      cache.deleteGroup('user:ada');
      expect(cache.get('k')).toEqual({ user: 'bob', org: 'beta' });

      // Full: the least recently used entry ('k') goes, and leaves its groups.
      cache.set('x', { user: 'cy', org: 'acme' });
      cache.set('y', { user: 'cy', org: 'acme' });
      expect(cache.get('k')).toBeUndefined();
      cache.set('k', { user: 'dan', org: 'gamma' });
      cache.deleteGroup('user:bob');
      expect(cache.get('k')).toEqual({ user: 'dan', org: 'gamma' });
      cache.deleteGroup('user:cy');
      expect(cache.get('y')).toBeUndefined();
    });

    it('groups loaded values too', async () => {
      const cache = people();
      await cache.getOrLoad('ada@acme', async () => ({ user: 'ada', org: 'acme' }));
      expect(cache.get('ada@acme')).toBeDefined();
      cache.deleteGroup('org:acme');
      expect(cache.get('ada@acme')).toBeUndefined();
    });
  });
});
