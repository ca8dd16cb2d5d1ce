import { LRUCache } from 'lru-cache';
import type { Totals, WindowRange } from './analytics-model';
import type { AnalyticsReader } from './analytics-ports';

export interface AnalyticsCacheOptions {
  /**
   * How long an answer is served without asking ClickHouse again. An older answer is still served
   * once while one refresh runs in the background (so no reader waits on a refresh), up to
   * twice `freshMs`; after that a reader waits for the query.
   */
  freshMs: number;
  /** Answers kept at most (least recently used go first). */
  maxEntries?: number;
}

interface Entry {
  value: Totals | Map<number, Totals>;
  at: number;
}

/**
 * The rollup reads, remembered for a moment. Dashboards poll, and every admin of an organization
 * asks the same questions: ClickHouse answers a few hundred such queries a second on two cores, the
 * API must answer a thousand (bench/analytics-query.bench.ts). Concurrent misses of one question
 * share one query. `forget` makes an organization's next reads ask ClickHouse (device states changed).
 */
export class CachedAnalyticsReader implements AnalyticsReader {
  private readonly entries: LRUCache<string, Entry>;
  private readonly loading = new Map<string, Promise<Entry['value']>>();
  /** Bumped by `forget`: part of every key, so an organization's earlier answers are never read again. */
  private readonly generations = new Map<string, number>();

  constructor(
    private readonly reader: AnalyticsReader,
    private readonly options: AnalyticsCacheOptions,
    private readonly clock: { nowMs(): number } = { nowMs: () => performance.now() },
  ) {
    this.entries = new LRUCache<string, Entry>({ max: options.maxEntries ?? 10_000 });
  }

  totals(orgId: string, range: WindowRange, deviceId: string | null): Promise<Totals> {
    return this.read(this.key('totals', orgId, range, deviceId), () =>
      this.reader.totals(orgId, range, deviceId),
    ) as Promise<Totals>;
  }

  bucketTotals(orgId: string, range: WindowRange, deviceId: string | null): Promise<Map<number, Totals>> {
    return this.read(this.key('buckets', orgId, range, deviceId), () =>
      this.reader.bucketTotals(orgId, range, deviceId),
    ) as Promise<Map<number, Totals>>;
  }

  /** The organization's figures changed in a way readers must see at once. */
  forget(orgId: string): void {
    this.generations.set(orgId, (this.generations.get(orgId) ?? 0) + 1);
  }

  private key(kind: string, orgId: string, range: WindowRange, deviceId: string | null): string {
    return `${kind}|${orgId}|${this.generations.get(orgId) ?? 0}|${range.granularity}|${range.from.getTime()}|${deviceId ?? '*'}`;
  }

  private read(key: string, load: () => Promise<Entry['value']>): Promise<Entry['value']> {
    if (this.options.freshMs <= 0) return load();
    const entry = this.entries.get(key);
    const age = entry ? this.clock.nowMs() - entry.at : Infinity;
    if (entry && age < this.options.freshMs) return Promise.resolve(entry.value);
    if (entry && age < this.options.freshMs * 2) {
      // Served as it is; the next reader gets the refreshed answer. A failed refresh is retried by the next stale read.
      this.refresh(key, load).catch(() => undefined);
      return Promise.resolve(entry.value);
    }
    return this.refresh(key, load);
  }

  private refresh(key: string, load: () => Promise<Entry['value']>): Promise<Entry['value']> {
    let pending = this.loading.get(key);
    if (!pending) {
      const startedAt = this.clock.nowMs();
      pending = load()
        .then((value) => {
          this.entries.set(key, { value, at: startedAt });
          return value;
        })
        .finally(() => this.loading.delete(key));
      this.loading.set(key, pending);
    }
    return pending;
  }
}
