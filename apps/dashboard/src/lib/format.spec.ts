import { bucketLabel, formatMetric, maskSecret, metricLabel, windowLabel } from './format';

describe('format', () => {
  it('formats metric values', () => {
    expect(formatMetric('total_analyzed', 12345)).toBe('12,345');
    expect(formatMetric('avg_classification_ms', 12.345)).toBe('12.3 ms');
    expect(metricLabel('dangerous_blocks')).toBe('Dangerous blocks');
  });

  it('labels buckets in UTC', () => {
    expect(bucketLabel('2026-11-27T05:00:00Z', '24h')).toBe('05:00');
    expect(bucketLabel('2026-11-27T00:00:00Z', '30d')).toBe('27 Nov');
    expect(windowLabel('30d')).toBe('last 30 days');
  });

  it('masks secrets but keeps the prefix and last four characters', () => {
    expect(maskSecret('stsek_abcdefghijklmnopqrstuvwxyz1234')).toBe('stsek_••••••••••••1234');
    expect(maskSecret('abcdefghijklmnop')).toBe('••••••••••••mnop');
    expect(maskSecret('short')).toBe('•••••');
  });
});
