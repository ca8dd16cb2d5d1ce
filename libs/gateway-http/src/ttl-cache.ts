export interface TtlCacheOptions<Value> {
  /** The bound: when full, expired entries go first, then everything. */
  maxEntries?: number;
  now?: () => number;
  /** Groups an entry belongs to (e.g. its user and its organization), for `deleteGroup`. */
  groupsOf?: (key: string, value: Value) => readonly string[];
}

interface Entry<Value> {
  value: Value;
  expiresAt: number;
  groups: readonly string[];
}

const NO_GROUPS: readonly string[] = [];

/**
 * A small in-memory cache whose entries expire after a fixed time. Bounded: when full, expired
 * entries go first, then everything (a burst of new keys must not grow memory without limit).
 * A TTL of 0 disables it.
 *
 * `getOrLoad` shares one load among concurrent misses of a key. An eviction (`deleteWhere`,
 * `deleteGroup`) also abandons every load in flight, since it may have read the state before the
 * change: its result still answers the requests already waiting for it, but is not stored, and the
 * next miss loads again.
 */
export class TtlCache<Value> {
  private readonly entries = new Map<string, Entry<Value>>();
  /** Group → keys of its entries, so evicting a group does not scan the cache. */
  private readonly groups = new Map<string, Set<string>>();
  /** Loads in flight by key; a load stores its result only while it is still the one listed here. */
  private readonly loads = new Map<string, Promise<Value>>();
  private readonly maxEntries: number;
  private readonly now: () => number;
  private readonly groupsOf: ((key: string, value: Value) => readonly string[]) | undefined;

  constructor(
    private readonly ttlMs: number,
    options: TtlCacheOptions<Value> = {},
  ) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.now = options.now ?? Date.now;
    this.groupsOf = options.groupsOf;
  }

  get(key: string): Value | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.remove(key, entry);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: Value): void {
    if (this.ttlMs <= 0) return;
    const previous = this.entries.get(key);
    if (previous) this.remove(key, previous);
    else if (this.entries.size >= this.maxEntries) this.evict();
    const groups = this.groupsOf?.(key, value) ?? NO_GROUPS;
    this.entries.set(key, { value, expiresAt: this.now() + this.ttlMs, groups });
    for (const group of groups) {
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
    if (this.ttlMs <= 0) return load();
    const cached = this.get(key);
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
    const entry = this.entries.get(key);
    if (entry) this.remove(key, entry);
  }

  /** Drops every entry whose value matches (e.g. all cached callers of one user). */
  deleteWhere(matches: (value: Value) => boolean): void {
    for (const [key, entry] of this.entries) if (matches(entry.value)) this.remove(key, entry);
    this.loads.clear();
  }

  /** Drops every entry of a group (see `groupsOf`). */
  deleteGroup(group: string): void {
    const keys = this.groups.get(group);
    if (keys) {
      for (const key of keys) {
        const entry = this.entries.get(key);
        if (entry) this.remove(key, entry);
      }
    }
    this.loads.clear();
  }

  private remove(key: string, entry: Entry<Value>): void {
    this.entries.delete(key);
    for (const group of entry.groups) {
      const keys = this.groups.get(group);
      keys?.delete(key);
      if (keys?.size === 0) this.groups.delete(group);
    }
  }

  private evict(): void {
    const now = this.now();
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.remove(key, entry);
    if (this.entries.size >= this.maxEntries) {
      this.entries.clear();
      this.groups.clear();
    }
  }
}
