import type { AnalyticsWindow } from './buckets';

export type MetricName = 'total_analyzed' | 'dangerous_blocks' | 'risky_warnings' | 'avg_classification_ms';

export const METRICS: readonly { key: MetricName; label: string; unit: string }[] = [
  { key: 'total_analyzed', label: 'Total analyzed', unit: 'addresses' },
  { key: 'dangerous_blocks', label: 'Dangerous blocks', unit: 'blocks' },
  { key: 'risky_warnings', label: 'Risky warnings', unit: 'warnings' },
  { key: 'avg_classification_ms', label: 'Average classification time', unit: 'ms' },
];

export function metricLabel(metric: MetricName): string {
  return METRICS.find((item) => item.key === metric)?.label ?? metric;
}

const integer = new Intl.NumberFormat('en', { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat('en', { maximumFractionDigits: 1 });

/** A metric's value for people: counts as integers, latency in ms with one decimal. */
export function formatMetric(metric: MetricName, value: number): string {
  return metric === 'avg_classification_ms' ? `${decimal.format(value)} ms` : integer.format(value);
}

/** The bucket's label on the axis and in the table: "14:00" for hours, "27 Nov" for days (UTC). */
export function bucketLabel(timestamp: string, window: AnalyticsWindow): string {
  const date = new Date(timestamp);
  if (window === '24h') return `${String(date.getUTCHours()).padStart(2, '0')}:00`;
  const month = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'][
    date.getUTCMonth()
  ];
  return `${date.getUTCDate()} ${month}`;
}

export function windowLabel(window: AnalyticsWindow): string {
  return window === '24h' ? 'last 24 hours' : 'last 30 days';
}

/** An enrollment key with all but its prefix and last four characters hidden. */
export function maskSecret(secret: string): string {
  if (secret.length <= 8) return '•'.repeat(secret.length);
  const underscore = secret.lastIndexOf('_', 12);
  const prefix = underscore > 0 ? secret.slice(0, underscore + 1) : '';
  return `${prefix}${'•'.repeat(12)}${secret.slice(-4)}`;
}
