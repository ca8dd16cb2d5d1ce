/** The contract's analytics windows and metrics, and how a window is cut into UTC buckets. */

export const WINDOWS = ['24h', '30d'] as const;
export type AnalyticsWindow = (typeof WINDOWS)[number];

export const METRICS = [
  'total_analyzed',
  'dangerous_blocks',
  'risky_warnings',
  'avg_classification_ms',
] as const;
export type Metric = (typeof METRICS)[number];

export interface Summary {
  total_analyzed: number;
  dangerous_blocks: number;
  risky_warnings: number;
  avg_classification_ms: number;
}

/** Sums of one bucket (or of a whole window), as the rollups hold them. */
export interface Totals {
  totalAnalyzed: number;
  dangerousBlocks: number;
  riskyWarnings: number;
  classificationMsSum: number;
}

export const NO_TOTALS: Totals = {
  totalAnalyzed: 0,
  dangerousBlocks: 0,
  riskyWarnings: 0,
  classificationMsSum: 0,
};

export type Granularity = 'hour' | 'day';

const HOUR_MS = 60 * 60 * 1000;
const DAY_MS = 24 * HOUR_MS;

/** A window as buckets: `from` (inclusive) to `to` (exclusive), `count` buckets of `bucketMs`. */
export interface WindowRange {
  granularity: Granularity;
  bucketMs: number;
  count: number;
  from: Date;
  to: Date;
}

/**
 * 24h: the 24 hourly buckets ending with the current hour; 30d: the 30 daily buckets ending with
 * today. UTC-aligned and half-open, so the current bucket runs until its end (not until `now`).
 */
export function windowRange(window: AnalyticsWindow, now: Date): WindowRange {
  const granularity: Granularity = window === '24h' ? 'hour' : 'day';
  const bucketMs = granularity === 'hour' ? HOUR_MS : DAY_MS;
  const count = window === '24h' ? 24 : 30;
  const currentStart = Math.floor(now.getTime() / bucketMs) * bucketMs;
  return {
    granularity,
    bucketMs,
    count,
    from: new Date(currentStart - (count - 1) * bucketMs),
    to: new Date(currentStart + bucketMs),
  };
}

export function summaryOf(totals: Totals): Summary {
  return {
    total_analyzed: totals.totalAnalyzed,
    dangerous_blocks: totals.dangerousBlocks,
    risky_warnings: totals.riskyWarnings,
    avg_classification_ms: averageMs(totals),
  };
}

export function metricValue(metric: Metric, totals: Totals): number {
  switch (metric) {
    case 'total_analyzed':
      return totals.totalAnalyzed;
    case 'dangerous_blocks':
      return totals.dangerousBlocks;
    case 'risky_warnings':
      return totals.riskyWarnings;
    case 'avg_classification_ms':
      return averageMs(totals);
  }
}

/** sum/count over what was classified; 0 where nothing was. Rounded to microseconds. */
function averageMs(totals: Totals): number {
  if (totals.totalAnalyzed === 0) return 0;
  return Math.round((totals.classificationMsSum / totals.totalAnalyzed) * 1000) / 1000;
}

export interface SeriesPoint {
  start: Date;
  value: number;
}

/** Every bucket of the range, in order, zero where `buckets` (keyed by start in ms) has nothing. */
export function zeroFilledSeries(
  metric: Metric,
  range: WindowRange,
  buckets: ReadonlyMap<number, Totals>,
): SeriesPoint[] {
  const points: SeriesPoint[] = [];
  for (let index = 0; index < range.count; index++) {
    const start = range.from.getTime() + index * range.bucketMs;
    points.push({ start: new Date(start), value: metricValue(metric, buckets.get(start) ?? NO_TOTALS) });
  }
  return points;
}
