/**
 * A small in-memory cache whose entries expire after a fixed time. Bounded: when full, expired
 * entries go first, then everything (a burst of new keys must not grow memory without limit).
 * A TTL of 0 disables it.
 */
export class TtlCache<Value> {
  private readonly entries = new Map<string, { value: Value; expiresAt: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  get(key: string): Value | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: Value): void {
    if (this.ttlMs <= 0) return;
    if (this.entries.size >= this.maxEntries) this.evict();
    this.entries.set(key, { value, expiresAt: this.now() + this.ttlMs });
  }

  /** Drops every entry whose value matches (e.g. all cached callers of one user). */
  deleteWhere(matches: (value: Value) => boolean): void {
    for (const [key, entry] of this.entries) if (matches(entry.value)) this.entries.delete(key);
  }

  private evict(): void {
    const now = this.now();
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.clear();
  }
}
