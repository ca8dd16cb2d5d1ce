import { performance } from 'node:perf_hooks';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { Logger } from '@sts/logger/create-logger';
import { LIMITS_MAX_WINDOW_MS } from '@sts/nats/kv-buckets';
import {
  checkAmount,
  WindowTable,
  type WindowCell,
  type WindowCount,
  type WindowCounter,
  type WindowEntry,
} from './window-counter';

export interface KvWindowCounterOptions {
  logger: Logger;
  /** Clock of the windows (epoch ms); tests pin it. */
  now?: () => number;
  /** After the bucket failed, how long to count in this process alone before asking it again. */
  retryAfterMs?: number;
}

/** Writes of one key lost to other replicas' writes before this one gives up and counts locally. */
const MAX_ATTEMPTS = 10;

interface Waiter {
  /** What this increment adds. */
  amount: number;
  /** This process's count right after this increment: the answer when the bucket cannot be reached. */
  local: number;
  resolve(count: number): void;
}

/**
 * Counts shared by every gateway replica, in a NATS KV bucket (`openLimitsBucket`): one key per scope,
 * window and hashed key, holding the count as decimal text. An increment writes count + n with the
 * revision it last saw (optimistic concurrency); when another replica wrote first, it reads the key
 * and tries again. Increments of one key in this process wait for the write in flight and go together
 * in the next one, so a burst from one address costs one write per round trip, not a write per request
 * fighting the others.
 *
 * When the bucket does not answer (timeout, NATS down, bucket full) every call answers from this
 * process's own count (the last shared count it saw plus its increments since), logs one warning per
 * outage, and leaves the bucket alone for `retryAfterMs` so requests do not each wait for a timeout.
 * Limits then hold per replica, as with in-memory counters (docs/decisions.md, "Rate limits").
 */
export class KvWindowCounter implements WindowCounter {
  private readonly table: WindowTable;
  private readonly retryAfterMs: number;
  /** Keys with a write in flight, and the increments waiting for the next one. */
  private readonly queued = new Map<string, Waiter[]>();
  /** Reads in flight, shared by everyone who asks for the same key meanwhile. */
  private readonly reads = new Map<string, Promise<void>>();
  private unavailableUntil = 0;
  private degraded = false;

  constructor(
    private readonly kv: KV,
    private readonly options: KvWindowCounterOptions,
  ) {
    this.table = new WindowTable(options.now ?? Date.now);
    this.retryAfterMs = options.retryAfterMs ?? 5_000;
  }

  increment(
    scope: string,
    key: string,
    windowMs: number,
    enough = Infinity,
    amount = 1,
  ): Promise<WindowCount> {
    checkAmount(amount);
    const { entry, id, resetInMs } = this.cell(scope, key, windowMs);
    // Counts only grow within a window: past the caller's limit, its answer cannot change.
    const settled = entry.count >= enough;
    entry.count += amount;
    const local = entry.count;
    if (settled || !this.available()) return Promise.resolve({ count: local, resetInMs });
    return new Promise((resolve) => {
      const waiter = { amount, local, resolve: (count: number) => resolve({ count, resetInMs }) };
      const waiting = this.queued.get(id);
      if (waiting) {
        waiting.push(waiter);
      } else {
        this.queued.set(id, []);
        void this.write(id, entry, [waiter]);
      }
    });
  }

  async read(scope: string, key: string, windowMs: number, enough = Infinity): Promise<WindowCount> {
    const { entry, id, resetInMs } = this.cell(scope, key, windowMs);
    if (entry.count >= enough || !this.available()) return { count: entry.count, resetInMs };
    try {
      await this.fetch(id, entry);
      this.answered();
      entry.count = Math.max(entry.count, entry.shared);
    } catch (error) {
      this.failed(error);
    }
    return { count: entry.count, resetInMs };
  }

  private cell(scope: string, key: string, windowMs: number): WindowCell {
    if (windowMs > LIMITS_MAX_WINDOW_MS) {
      throw new Error(`a shared window is at most ${LIMITS_MAX_WINDOW_MS} ms (the bucket's TTL follows it)`);
    }
    return this.table.cell(scope, key, windowMs);
  }

  /** Adds the waiters' increments, then those that queued meanwhile, until none is left. */
  private async write(id: string, entry: WindowEntry, first: Waiter[]): Promise<void> {
    let waiters = first;
    while (waiters.length > 0) {
      const n = waiters.reduce((sum, waiter) => sum + waiter.amount, 0);
      if (!this.available()) {
        for (const waiter of waiters) waiter.resolve(waiter.local);
      } else {
        try {
          const total = await this.add(id, entry, n);
          this.answered();
          entry.count = Math.max(entry.count, total);
          // Each request gets its own place in the count, as if they had come one by one.
          let place = total - n;
          for (const waiter of waiters) {
            place += waiter.amount;
            waiter.resolve(Math.max(place, waiter.local));
          }
        } catch (error) {
          this.failed(error);
          for (const waiter of waiters) waiter.resolve(waiter.local);
        }
      }
      waiters = this.queued.get(id)?.splice(0) ?? [];
    }
    this.queued.delete(id);
  }

  /** Adds `n` to the shared count; returns the count after. */
  private async add(id: string, entry: WindowEntry, n: number): Promise<number> {
    for (let attempt = 1; ; attempt++) {
      // A key never seen is usually new in its window: revision 0 creates it without reading first.
      const next = entry.shared + n;
      try {
        const revision = await this.kv.put(id, String(next), { previousSeq: entry.revision });
        if (revision > entry.revision) {
          entry.shared = next;
          entry.revision = revision;
        }
        return next;
      } catch (error) {
        if (!isConflict(error) || attempt >= MAX_ATTEMPTS) throw error;
      }
      // Another replica wrote since: read its count and revision, and add to that.
      await this.fetch(id, entry);
    }
  }

  private fetch(id: string, entry: WindowEntry): Promise<void> {
    let pending = this.reads.get(id);
    if (!pending) {
      pending = this.kv
        .get(id)
        .then((found) => {
          if (!found) {
            // Gone (or never written): the next write creates it.
            entry.shared = 0;
            entry.revision = 0;
          } else if (found.revision > entry.revision) {
            const value = found.operation === 'PUT' ? Number(found.string()) : 0;
            entry.shared = Number.isSafeInteger(value) && value > 0 ? value : 0;
            entry.revision = found.revision;
          }
        })
        .finally(() => this.reads.delete(id));
      this.reads.set(id, pending);
    }
    return pending;
  }

  private available(): boolean {
    return performance.now() >= this.unavailableUntil;
  }

  private answered(): void {
    if (!this.degraded) return;
    this.degraded = false;
    this.options.logger.info('rate-limit counters: NATS KV answers again; limits are shared across replicas');
  }

  private failed(error: unknown): void {
    if (isConflict(error)) {
      // Busy, not broken: this one request is counted in this process.
      this.options.logger.debug({ err: error }, 'rate-limit counter: too many concurrent writes of one key');
      return;
    }
    this.unavailableUntil = performance.now() + this.retryAfterMs;
    if (this.degraded) return;
    this.degraded = true;
    this.options.logger.warn(
      { err: error },
      'rate-limit counters: NATS KV did not answer; each replica counts alone until it does',
    );
  }
}

function isConflict(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === JetStreamApiCodes.StreamWrongLastSequence ||
      error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}
