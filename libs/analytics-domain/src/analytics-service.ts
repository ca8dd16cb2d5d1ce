import {
  summaryOf,
  windowRange,
  zeroFilledSeries,
  type AnalyticsWindow,
  type Metric,
  type SeriesPoint,
  type Summary,
} from './analytics-model';
import type { AnalyticsReader } from './analytics-ports';

/** Summaries and series of an organization's telemetry, over the contract's windows. */
export class AnalyticsService {
  constructor(
    private readonly reader: AnalyticsReader,
    private readonly clock: { now(): Date },
  ) {}

  async summary(orgId: string, window: AnalyticsWindow, deviceId: string | null): Promise<Summary> {
    const range = windowRange(window, this.clock.now());
    return summaryOf(await this.reader.totals(orgId, range, deviceId));
  }

  async series(
    orgId: string,
    metric: Metric,
    window: AnalyticsWindow,
    deviceId: string | null,
  ): Promise<SeriesPoint[]> {
    const range = windowRange(window, this.clock.now());
    return zeroFilledSeries(metric, range, await this.reader.bucketTotals(orgId, range, deviceId));
  }
}
