import {
  METRICS,
  metricValue,
  NO_TOTALS,
  summaryOf,
  windowRange,
  zeroFilledSeries,
  type Totals,
} from './analytics-model';

describe('windowRange', () => {
  it('24h: 24 hourly UTC buckets ending with the current hour, half-open', () => {
    const range = windowRange('24h', new Date('2026-11-25T10:59:59.999Z'));
    expect(range).toMatchObject({ granularity: 'hour', count: 24, bucketMs: 3_600_000 });
    expect(range.from.toISOString()).toBe('2026-11-24T11:00:00.000Z');
    expect(range.to.toISOString()).toBe('2026-11-25T11:00:00.000Z');
    // On the boundary the new hour is the current one.
    expect(windowRange('24h', new Date('2026-11-25T11:00:00.000Z')).from.toISOString()).toBe(
      '2026-11-24T12:00:00.000Z',
    );
  });

  it('30d: 30 daily UTC buckets ending with today', () => {
    const range = windowRange('30d', new Date('2026-03-01T00:30:00.000Z'));
    expect(range).toMatchObject({ granularity: 'day', count: 30 });
    expect(range.from.toISOString()).toBe('2026-01-31T00:00:00.000Z');
    expect(range.to.toISOString()).toBe('2026-03-02T00:00:00.000Z');
  });
});

describe('summaries and series', () => {
  const totals: Totals = { totalAnalyzed: 3, dangerousBlocks: 1, riskyWarnings: 2, classificationMsSum: 10 };

  it('averages classification time as sum/count, 0 when nothing was classified', () => {
    expect(summaryOf(totals)).toEqual({
      total_analyzed: 3,
      dangerous_blocks: 1,
      risky_warnings: 2,
      avg_classification_ms: 3.333,
    });
    expect(summaryOf(NO_TOTALS).avg_classification_ms).toBe(0);
  });

  it('reads each metric from its own total', () => {
    expect(METRICS.map((metric) => [metric, metricValue(metric, totals)])).toEqual([
      ['total_analyzed', 3],
      ['dangerous_blocks', 1],
      ['risky_warnings', 2],
      ['avg_classification_ms', 3.333],
    ]);
  });

  it('zero-fills every bucket of the window, oldest first', () => {
    const range = windowRange('24h', new Date('2026-11-25T10:20:00Z'));
    const lastHour = Date.parse('2026-11-25T10:00:00Z');
    const firstHour = Date.parse('2026-11-24T11:00:00Z');
    const series = zeroFilledSeries(
      'avg_classification_ms',
      range,
      new Map([
        [lastHour, totals],
        [firstHour, { ...totals, classificationMsSum: 6 }],
      ]),
    );
    expect(series).toHaveLength(24);
    expect(series[0]).toEqual({ start: new Date(firstHour), value: 2 });
    expect(series[23]).toEqual({ start: new Date(lastHour), value: 3.333 });
    expect(series.slice(1, 23).every((point) => point.value === 0)).toBe(true);
  });
});
