/**
 * Garbage-collection pauses of one process, on the wall clock (ms since the epoch), so that pauses of
 * several processes can be laid over the requests of a run. Used by child-agent.ts in each service
 * and by the load generator for itself.
 */
import { constants, PerformanceObserver, performance, type PerformanceEntry } from 'node:perf_hooks';

/** [start, duration] in ms; start on the wall clock. */
export type GcPause = [startMs: number, durationMs: number, kind: string];

const KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'scavenge',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'mark-compact',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental marking',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
};

export function watchGcPauses(): { stop(): Promise<GcPause[]> } {
  const pauses: GcPause[] = [];
  const record = (entries: PerformanceEntry[]) => {
    for (const entry of entries) {
      const kind = (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? 0;
      pauses.push([performance.timeOrigin + entry.startTime, entry.duration, KINDS[kind] ?? `kind ${kind}`]);
    }
  };
  const observer = new PerformanceObserver((list) => record(list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  return {
    // Entries are delivered asynchronously: wait a moment for the last ones.
    stop: () =>
      new Promise((resolve) =>
        setTimeout(() => {
          record(observer.takeRecords());
          observer.disconnect();
          resolve(pauses);
        }, 50),
      ),
  };
}

/** The wall clock with performance.now()'s resolution. */
export function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}
