/** Analytics windows of the API: 24 hourly buckets, or 30 daily buckets (UTC-aligned). */
export type AnalyticsWindow = '24h' | '30d';

export interface Point {
  readonly timestamp: string;
  readonly value: number;
}

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** Bucket size and count of a window. */
export function windowShape(window: AnalyticsWindow): { readonly sizeMs: number; readonly count: number } {
  return window === '24h' ? { sizeMs: HOUR_MS, count: 24 } : { sizeMs: DAY_MS, count: 30 };
}

/**
 * Every bucket of the window, oldest first, ending with the bucket that holds `now` (the current hour
 * or today, UTC): values the API sent are kept, missing buckets read 0, so the axis never has gaps.
 * Points outside the window are left out.
 */
export function fillBuckets(points: readonly Point[], window: AnalyticsWindow, now: Date): Point[] {
  const { sizeMs, count } = windowShape(window);
  const last = Math.floor(now.getTime() / sizeMs) * sizeMs;
  const byStart = new Map<number, number>();
  for (const point of points) {
    const start = Math.floor(Date.parse(point.timestamp) / sizeMs) * sizeMs;
    if (Number.isFinite(start)) byStart.set(start, (byStart.get(start) ?? 0) + point.value);
  }
  const filled: Point[] = [];
  for (let index = count - 1; index >= 0; index -= 1) {
    const start = last - index * sizeMs;
    filled.push({ timestamp: new Date(start).toISOString(), value: byStart.get(start) ?? 0 });
  }
  return filled;
}

/** A rounded maximum for a chart's scale: 1, 2 or 5 times a power of ten, at least 1. */
export function niceMax(values: readonly number[]): number {
  const max = Math.max(0, ...values);
  if (max <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 5, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}
