import { LRUCache } from 'lru-cache';

export interface GroupedCacheOptions<Value> {
  /** The bound: when full, the least recently used entry goes. */
  maxEntries?: number;
  /** Clock of the TTL (epoch ms); tests pin it. */
  now?: () => number;
  /** Groups an entry belongs to (e.g. its user and its organization), for `deleteGroup`. */
  groupsOf?: (key: string, value: Value) => readonly string[];
}

/**
 * An `lru-cache` whose entries expire after a fixed time, with what the gateway's caches add on top:
 * - groups (`groupsOf`, `deleteGroup`): an index from group to keys, kept in step through lru-cache's
 *   `dispose`, so evicting a user's or an organization's entries does not scan the cache;
 * - `getOrLoad`, which shares one load among concurrent misses of a key. An eviction by group also
 *   abandons every load in flight, since it may have read the state before the change: its result still
 *   answers the requests already waiting for it, but is not stored, and the next miss loads again.
 * A TTL of 0 disables it. (lru-cache's own `fetch` does not abandon loads on such evictions.)
 */
export class GroupedCache<Value extends NonNullable<unknown>> {
  private readonly cache: LRUCache<string, Value> | undefined;
  /** Group → keys of its entries. */
  private readonly groups = new Map<string, Set<string>>();
  /** Loads in flight by key; a load stores its result only while it is still the one listed here. */
  private readonly loads = new Map<string, Promise<Value>>();
  private readonly groupsOf: ((key: string, value: Value) => readonly string[]) | undefined;

  constructor(ttlMs: number, options: GroupedCacheOptions<Value> = {}) {
    this.groupsOf = options.groupsOf;
    const now = options.now ?? Date.now;
    this.cache =
      ttlMs > 0
        ? new LRUCache<string, Value>({
            max: options.maxEntries ?? 10_000,
            ttl: ttlMs,
            perf: { now },
            // Expiry exact to the millisecond (the default 1 ms resolution caches the clock).
            ttlResolution: 0,
            // Replaced, expired, evicted for room or deleted: the entry leaves its groups.
            dispose: (value, key) => this.ungroup(key, value),
          })
        : undefined;
  }

  get(key: string): Value | undefined {
    return this.cache?.get(key);
  }

  set(key: string, value: Value): void {
    if (!this.cache) return;
    this.cache.set(key, value);
    for (const group of this.groupsOf?.(key, value) ?? []) {
      const keys = this.groups.get(group);
      if (keys) keys.add(key);
      else this.groups.set(group, new Set([key]));
    }
  }

  /**
   * The cached value, or the result of `load` (stored for the TTL once it resolves). Concurrent
   * misses of one key share one load; a failed load is not kept, so the next miss tries again.
   */
  getOrLoad(key: string, load: () => Promise<Value>): Promise<Value> {
    if (!this.cache) return load();
    const cached = this.cache.get(key);
    if (cached !== undefined) return Promise.resolve(cached);
    const inFlight = this.loads.get(key);
    if (inFlight) return inFlight;
    const loading: Promise<Value> = load().then(
      (value) => {
        if (this.loads.get(key) === loading) {
          this.loads.delete(key);
          this.set(key, value);
        }
        return value;
      },
      (error: unknown) => {
        if (this.loads.get(key) === loading) this.loads.delete(key);
        throw error;
      },
    );
    this.loads.set(key, loading);
    return loading;
  }

  /** Drops one entry (a load in flight for it still stores its result). */
  delete(key: string): void {
    this.cache?.delete(key);
  }

  /** Drops every entry of a group (see `groupsOf`), and abandons the loads in flight. */
  deleteGroup(group: string): void {
    const keys = this.groups.get(group);
    if (keys) for (const key of [...keys]) this.cache?.delete(key);
    this.loads.clear();
  }

  private ungroup(key: string, value: Value): void {
    for (const group of this.groupsOf?.(key, value) ?? []) {
      const keys = this.groups.get(group);
      keys?.delete(key);
      if (keys?.size === 0) this.groups.delete(group);
    }
  }
}
